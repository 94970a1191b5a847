/**
 * Graphs on cpu (Device.compileGraph, see ../graph.ts): the kernel adapters of ./kernels.ts run
 * once in recording mode, which keeps every addon call (export name and arguments: buffers,
 * strides, sizes) instead of running it. The recorded calls are then handed to the addon once
 * (graphCreate, native/graph.cc), which reads every argument into C++ values; a run is one
 * graphRun call that executes all kernels in order on the native side, with the buffer arguments
 * that view a slot (a graph input or output) re-pointed into that run's storage. A call the addon
 * cannot hold as a graph node (see `cpuGraphTesting.uncovered`) splits the graph: it is called
 * from JS between native segments, as before. gatherLinear and moeExperts read expert ids on the
 * host inside their adapters, so graphs containing them run through replayKernels instead.
 */
import type { Storage } from "../device.js";
import { replayKernels, type GraphExecutable, type GraphSpec } from "../graph.js";
import { getKernel } from "../kernels.js";
import { native, recordNativeCalls } from "./native.js";

interface Call {
  readonly fn: (...args: unknown[]) => unknown;
  readonly args: unknown[];
  readonly name: string;
}

/** An argument of call `call` (index `arg`) that views bytes [start, start + length) of slot `slot`. */
interface SlotArg {
  readonly call: number;
  readonly arg: number;
  readonly slot: number;
  readonly start: number;
  readonly length: number;
}

/** A run of consecutive calls: one native graph, or a single call made from JS. */
type Segment =
  | { readonly kind: "native"; readonly graph: unknown; readonly calls: readonly Call[] }
  | { readonly kind: "js"; readonly call: Call; readonly slotArgs: readonly SlotArg[] };

/**
 * Test hooks: `nativeCalls` counts the JS->native calls graph runs make (one per native segment
 * and one per uncovered call); export names in `uncovered` are kept out of native graphs (the
 * fallback path) in graphs compiled while they are listed.
 */
export const cpuGraphTesting = { nativeCalls: 0, uncovered: new Set<string>() };

function coverable(c: Call): boolean {
  return !cpuGraphTesting.uncovered.has(c.name) && c.args.every((a) =>
    a === null || a === undefined || typeof a === "number" || ArrayBuffer.isView(a) ||
    (Array.isArray(a) && a.every((e) => typeof e === "number")));
}

export function compileCpuGraph(spec: GraphSpec): GraphExecutable {
  if (spec.calls.some((c) => c.op === "gatherLinear" || c.op === "moeExperts")) return replayKernels("cpu", spec);
  const calls: Call[] = [];
  recordNativeCalls((fn, args, name) => { calls.push({ fn, args, name }); }, () => {
    for (const c of spec.calls) (getKernel(c.op, "cpu") as (...a: unknown[]) => void)(...c.args);
  });
  const holders = spec.placeholders.map((s) => s.handle as Uint8Array);
  const slotArgs: SlotArg[] = [];
  calls.forEach((c, i) => c.args.forEach((a, j) => {
    if (!(a instanceof Uint8Array)) return;
    const slot = holders.findIndex((h) => h.buffer === a.buffer && a.byteOffset >= h.byteOffset && a.byteOffset + a.byteLength <= h.byteOffset + h.byteLength);
    if (slot >= 0) slotArgs.push({ call: i, arg: j, slot, start: a.byteOffset - holders[slot].byteOffset, length: a.byteLength });
  }));
  const segments: Segment[] = [];
  for (let i = 0; i < calls.length;) {
    if (!coverable(calls[i])) {
      segments.push({ kind: "js", call: calls[i], slotArgs: slotArgs.filter((s) => s.call === i) });
      i++;
      continue;
    }
    let end = i;
    while (end < calls.length && coverable(calls[end])) end++;
    const refs = slotArgs.filter((s) => s.call >= i && s.call < end).map((s) => [s.call - i, s.arg, s.slot, s.start, s.length]);
    // `calls` keeps the JS buffers alive that the native graph points into.
    const part = calls.slice(i, end);
    segments.push({ kind: "native", graph: native().graphCreate(part.map((c) => c.name), part.map((c) => c.args), refs), calls: part });
    i = end;
  }
  return {
    run(slots: readonly Storage[]): void {
      const buffers = slots.map((s) => s.handle as Uint8Array);
      for (const seg of segments) {
        cpuGraphTesting.nativeCalls++;
        if (seg.kind === "native") {
          native().graphRun(seg.graph, buffers);
        } else {
          for (const s of seg.slotArgs) seg.call.args[s.arg] = buffers[s.slot].subarray(s.start, s.start + s.length);
          seg.call.fn(...seg.call.args);
        }
      }
    },
  };
}
