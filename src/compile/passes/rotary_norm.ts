/**
 * q/k-norm fusion: a `rotaryKVWrite` whose q and k are the whole results of `rmsNorm` nodes that
 * nothing else reads (Qwen3's q_norm / k_norm over each head's dims, of one eps and offset) becomes
 * one `normRotaryKVWrite` (devices/kernels.ts) reading the norms' inputs: two kernel calls fewer per
 * layer and step. Runs after the rotary + KV-write and rotary-gather fusions, only on devices that
 * register `normRotaryKVWrite`; the kernel normalizes with the eager rmsNorm's arithmetic.
 */
import type { Storage } from "../../devices/device.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";
import { eliminateDeadCode } from "./dce.js";

interface Norm {
  readonly x: TensorView;
  readonly w: TensorView;
  readonly eps: number;
  readonly offset: number;
  readonly at: number;
}

const dense = (v: TensorView) => isContiguous(v) && v.dtype === "float32";

/** The nodes with q/k norms fused into rotaryKVWrite (see the file comment); `temporary`: storages that die with the call. */
export function fuseRotaryNorms(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const readers = new Map<Storage, number>(), writtenAt = new Map<Storage, number[]>();
  nodes.forEach((n, i) => {
    for (const s of n.reads) readers.set(s, (readers.get(s) ?? 0) + 1);
    for (const s of n.writes) writtenAt.set(s, [...(writtenAt.get(s) ?? []), i]);
  });
  const writtenBetween = (s: Storage, from: number, to: number) => (writtenAt.get(s) ?? []).some((i) => i > from && i < to);
  const norms = new Map<Storage, Norm>();
  nodes.forEach((n, at) => {
    if (n.op !== "rmsNorm") return;
    const [x, w, out, eps, offset] = n.args as [TensorView, TensorView, TensorView, number, number];
    const ok = dense(x) && dense(out) && isContiguous(w) && w.shape.length === 1 && numel(out) === numel(x)
      && temporary.has(out.storage) && !outputs.has(out.storage) && readers.get(out.storage) === 1 && (writtenAt.get(out.storage) ?? []).length === 1;
    if (ok) norms.set(out.storage, { x, w, eps, offset, at });
  });
  if (norms.size === 0) return [...nodes];
  /** The norm whose whole result is `v` ([B, L, H, D]), its input unchanged up to node `at`. */
  const normOf = (v: TensorView, at: number): Norm | null => {
    const n = norms.get(v.storage);
    const ok = n && v.offset === 0 && numel(v) === numel(n.x) && dense(v) && v.shape.length === 4
      && n.w.shape[0] === v.shape[3] && !writtenBetween(n.x.storage, n.at, at) && !writtenBetween(n.w.storage, n.at, at);
    return ok ? n : null;
  };
  const rewritten = nodes.map((n, at): GraphNode => {
    if (n.op !== "rotaryKVWrite" || !n.args[0]) return n;
    const [q, qOut, k, v, cos, sin, kc, vc, slots, rows = null] = n.args as (TensorView | null)[];
    const nq = normOf(q!, at), nk = normOf(k!, at);
    if (!nq || !nk || nq === nk || nq.eps !== nk.eps || nq.offset !== nk.offset || nq.w.dtype !== nk.w.dtype) return n;
    const written = new Set(n.writes);
    if ([nq.x, nk.x, nq.w, nk.w].some((t) => written.has(t.storage))) return n;
    const reads = [...n.reads.filter((s) => s !== q!.storage && s !== k!.storage), nq.x.storage, nk.x.storage, nq.w.storage, nk.w.storage];
    const shaped = (x: TensorView, like: TensorView): TensorView => ({ ...x, shape: like.shape, strides: like.strides });
    return {
      op: "normRotaryKVWrite",
      args: [shaped(nq.x, q!), qOut, shaped(nk.x, k!), v, cos, sin, kc, vc, slots, { q: nq.w, k: nk.w, eps: nq.eps, offset: nq.offset }, rows],
      reads, writes: n.writes,
    };
  });
  return eliminateDeadCode(rewritten, outputs, temporary);
}
