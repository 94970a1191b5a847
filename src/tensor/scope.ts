/**
 * Memory scopes (TensorFlow.js's tidy): JS has no reference counting, so temporaries of a
 * forward pass would wait for the garbage collector, and a prefill would hold every layer's
 * intermediates at once. `tidy(fn)` hands the storage of every tensor allocated inside `fn` back to
 * its device when `fn` returns — except the storage of what `fn` returns and of tensors passed to
 * `keep` (e.g. KV-cache buffers). Devices without `release` simply let the collector free it.
 * Nothing outside `fn` may hold a tensor allocated inside it unless it was returned or kept.
 */
import type { Storage } from "../devices/device.js";
import type { Tensor } from "./tensor.js";

const scopes: Set<Storage>[] = [];
const kept = new WeakSet<Storage>();

/** Record a fresh allocation in the innermost open scope (called by the op front-end). */
export function track(storage: Storage): void {
  scopes[scopes.length - 1]?.add(storage);
}

/** Exempt tensors from release by every open scope (they outlive it). Returns the argument. */
export function keep<T extends Tensor | null>(t: T): T {
  if (t) {
    kept.add(t.storage);
    for (const s of scopes) s.delete(t.storage);
  }
  return t;
}

type Tensors = Tensor | Tensor[] | Record<string, Tensor | null> | null;

/** Run `fn`; release the storage it allocated except that of its result (a tensor, array or record of tensors). */
export function tidy<T extends Tensors>(fn: () => T): T {
  const scope = new Set<Storage>();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } finally {
    scopes.pop();
  }
  const out = (result === null ? [] : "storage" in result ? [result] : Object.values(result as object)) as (Tensor | null)[];
  for (const t of out) {
    if (!t || !scope.delete(t.storage)) continue;
    if (!kept.has(t.storage)) track(t.storage); // the caller's scope now owns the result
  }
  for (const storage of scope) storage.device.release?.(storage);
  return result;
}
