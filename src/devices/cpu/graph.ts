/**
 * Graphs on cpu (Device.compileGraph, see ../graph.ts): the kernel adapters of ./kernels.ts run
 * once in recording mode, which keeps every addon call (function and arguments: buffers, strides,
 * sizes) instead of running it. A run calls the recorded addon functions in order, with only the
 * buffer arguments that view a slot (a graph input or output) re-sliced from that run's storage:
 * no adapter work, view slicing or shape arithmetic per kernel. gatherLinear reads expert ids on
 * the host inside its adapter, so graphs containing it run through replayKernels instead.
 */
import type { Storage } from "../device.js";
import { replayKernels, type GraphExecutable, type GraphSpec } from "../graph.js";
import { getKernel } from "../kernels.js";
import { recordNativeCalls } from "./native.js";

interface Call {
  readonly fn: (...args: unknown[]) => unknown;
  readonly args: unknown[];
}

/** An argument of call `call` (index `arg`) that views bytes [start, start + length) of slot `slot`. */
interface SlotArg {
  readonly call: number;
  readonly arg: number;
  readonly slot: number;
  readonly start: number;
  readonly length: number;
}

export function compileCpuGraph(spec: GraphSpec): GraphExecutable {
  if (spec.calls.some((c) => c.op === "gatherLinear")) return replayKernels("cpu", spec);
  const calls: Call[] = [];
  recordNativeCalls((fn, args) => { calls.push({ fn, args }); }, () => {
    for (const c of spec.calls) (getKernel(c.op, "cpu") as (...a: unknown[]) => void)(...c.args);
  });
  const holders = spec.placeholders.map((s) => s.handle as Uint8Array);
  const slotArgs: SlotArg[] = [];
  calls.forEach((c, i) => c.args.forEach((a, j) => {
    if (!(a instanceof Uint8Array)) return;
    const slot = holders.findIndex((h) => h.buffer === a.buffer && a.byteOffset >= h.byteOffset && a.byteOffset + a.byteLength <= h.byteOffset + h.byteLength);
    if (slot >= 0) slotArgs.push({ call: i, arg: j, slot, start: a.byteOffset - holders[slot].byteOffset, length: a.byteLength });
  }));
  return {
    run(slots: readonly Storage[]): void {
      for (const s of slotArgs) calls[s.call].args[s.arg] = (slots[s.slot].handle as Uint8Array).subarray(s.start, s.start + s.length);
      for (let i = 0; i < calls.length; i++) calls[i].fn(...calls[i].args);
    },
  };
}
