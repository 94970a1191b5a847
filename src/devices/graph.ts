/**
 * How a device runs a captured graph (compile/): a fixed list of kernel calls over fixed views,
 * where only the storages of "slots" (the graph's inputs and outputs) change from run to run.
 * A device may implement `Device.compileGraph` to run the whole list its own way (webgpu: one
 * recorded command sequence); `replayKernels` is the portable default, which calls each kernel in
 * order from JS with no front-end work (no validation, shape logic or allocation).
 */
import type { Storage } from "./device.js";
import { getKernel, type OpName } from "./kernels.js";
import type { TensorView } from "./view.js";

/** A view whose storage is bound per run: slot `slot` of the graph (an input or an output). */
export interface SlotView extends TensorView {
  storage: Storage;
  readonly slot: number;
}

/** One kernel call: the op and its arguments exactly as the kernel takes them. */
export interface GraphCall {
  readonly op: OpName;
  readonly args: readonly unknown[];
}

export interface GraphSpec {
  readonly calls: readonly GraphCall[];
  /** Every argument view in `calls` bound per run (they are objects inside calls' args). */
  readonly slotViews: readonly SlotView[];
  /** The storage each slot holds while the graph is built (same sizes as every later binding). */
  readonly placeholders: readonly Storage[];
}

/** A graph ready to run: `run(slots)` runs every call with slot i bound to `slots[i]`. */
export interface GraphExecutable {
  run(slots: readonly Storage[]): void;
}

/** The portable runner: every call's kernel looked up once, then called in order per run. */
export function replayKernels(deviceType: string, spec: GraphSpec): GraphExecutable {
  const kernels = spec.calls.map((c) => getKernel(c.op, deviceType) as (...a: unknown[]) => void);
  const calls = spec.calls.map((c) => c.args);
  const views = spec.slotViews;
  return {
    run(slots) {
      for (const v of views) v.storage = slots[v.slot];
      for (let i = 0; i < kernels.length; i++) kernels[i](...calls[i]);
    },
  };
}
