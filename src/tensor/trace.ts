/**
 * The front-end's trace hook: one observer (installed by compile/, which tensor/ never imports)
 * sees every storage the front-end allocates, every host upload and every read of values. Kernel
 * calls themselves are observed one layer down, at the kernel registry (devices/kernels.ts).
 * With no observer installed each hook is one null check.
 */
import type { Storage } from "../devices/device.js";

export interface TraceObserver {
  /** A fresh output storage allocated by an op (tensor/ops.ts `empty`). */
  allocated(storage: Storage): void;
  /** Host bytes uploaded to a device (scalar operands, tensors made from JS values): `numel` elements. */
  uploaded(storage: Storage, numel: number): void;
  /** Values read back to the host (`data()`, `item()`, a move off a device); `what` names the call. */
  read(what: string): void;
}

let current: TraceObserver | null = null;

/** Install (or with null remove) the observer; returns the previous one. */
export function setTraceObserver(o: TraceObserver | null): TraceObserver | null {
  const prev = current;
  current = o;
  return prev;
}

/** The installed observer, or null. */
export function traceObserver(): TraceObserver | null {
  return current;
}
