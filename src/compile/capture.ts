/**
 * Capture: run a function once, eagerly, while recording every kernel call the tensor front-end
 * makes (the kernel registry's observer) and every storage it allocates, uploads or reads
 * (tensor/trace.ts). The result is the call's real result plus a graph: kernel calls in order,
 * each with the storages it reads and writes.
 *
 * A graph break (the call still completes eagerly, and is reported) happens on:
 * - reading values (`data()`, `item()`, `tolist()`, moving a tensor between devices): the rest of
 *   the function may depend on them;
 * - host data of more than one element uploaded inside the function (`tensor([...])`, `full`,
 *   `arange`, `fromBytes`): a replay cannot know what the JS would compute next time, so such data
 *   must be passed in as an argument. One-element uploads (the scalar operand of `x.mul(2)`,
 *   `where(m, 0, -Infinity)`) are baked into the graph as constants;
 * - an async function (reads can only happen after an await), a kernel with unknown side effects,
 *   or a graph that spans two devices.
 */
import type { Device, Storage } from "../devices/device.js";
import { setKernelObserver, type OpName } from "../devices/kernels.js";
import type { TensorView } from "../devices/view.js";
import { setTraceObserver } from "../tensor/trace.js";
import { WRITTEN_ARGS } from "./op_effects.js";

export interface GraphNode {
  readonly op: OpName;
  readonly args: readonly unknown[];
  readonly reads: readonly Storage[];
  readonly writes: readonly Storage[];
}

export interface Capture {
  /** What the function returned (computed eagerly). */
  readonly result: unknown;
  readonly nodes: readonly GraphNode[];
  /** The device every node ran on (null: no kernel ran). */
  readonly device: Device | null;
  /** Storages the front-end allocated during the call (intermediates and outputs). */
  readonly allocated: ReadonlySet<Storage>;
  /** Why the call cannot be replayed, or null. */
  readonly breakReason: string | null;
}

let depth = 0;

/** True while a capture is running (a compiled function called inside another runs eagerly, so it is traced inline). */
export function capturing(): boolean {
  return depth > 0;
}

/** Is `v` a kernel's view argument? */
export function isView(v: unknown): v is TensorView {
  return typeof v === "object" && v !== null && "storage" in v && "strides" in v;
}

/** Every view inside a kernel argument (arrays of views, parameter records such as SdpaParams.sinks). */
export function viewsIn(v: unknown, out: TensorView[] = []): TensorView[] {
  if (isView(v)) out.push(v);
  else if (Array.isArray(v)) for (const x of v) viewsIn(x, out);
  else if (typeof v === "object" && v !== null) for (const x of Object.values(v)) viewsIn(x, out);
  return out;
}

/** Run `fn` once, eagerly, recording its graph. */
export function capture(fn: () => unknown): Capture {
  const nodes: GraphNode[] = [];
  const allocated = new Set<Storage>();
  let device: Device | null = null;
  let breakReason: string | null = null;
  const brk = (why: string) => { breakReason ??= why; };
  const prevKernel = setKernelObserver((op, deviceType, kernel, args) => {
    if (!breakReason) {
      const written = WRITTEN_ARGS[op];
      if (!written) brk(`op '${op}' has unknown side effects`);
      else {
        const writes = written.flatMap((i) => viewsIn(args[i])).map((v) => v.storage);
        const reads = args.flatMap((a, i) => (written.includes(i) ? [] : viewsIn(a))).map((v) => v.storage);
        const dev = (writes[0] ?? reads[0])?.device ?? null;
        if (device && dev && dev !== device) brk(`the function runs ops on two devices (${device.name} and ${dev.name})`);
        device ??= dev;
        nodes.push({ op, args, reads, writes });
      }
    }
    (kernel as (...a: unknown[]) => void)(...args);
  });
  const prevTrace = setTraceObserver({
    allocated: (s) => { allocated.add(s); },
    uploaded: (_s, numel) => {
      if (numel !== 1) brk(`host data (${numel} values) is uploaded inside the function; pass it in as a tensor argument`);
    },
    read: (what) => brk(`${what} reads tensor values on the host`),
  });
  depth++;
  let result: unknown;
  try {
    result = fn();
  } finally {
    depth--;
    setKernelObserver(prevKernel);
    setTraceObserver(prevTrace);
  }
  if (result instanceof Promise) brk("the function is async (compile traces synchronous code; awaiting values breaks the graph)");
  return { result, nodes, device, allocated, breakReason };
}
