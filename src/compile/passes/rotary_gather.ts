/**
 * Rotary-gather fusion: a `rotaryKVWrite` whose cos and sin are the results of `embedding` gathers
 * of per-position tables by one positions tensor (a graph-ready step's rotary tables, gathered
 * once per step and read by every layer) reads the tables and the positions itself (its `rows`
 * argument, devices/kernels.ts), so the two gathers disappear when nothing else reads their
 * results (a decode step: two dispatches fewer). Runs after the rotary + KV-write fusion, only on
 * devices that register `rotaryKVWrite`; the gathers' range check moves into the kernel.
 */
import type { Storage } from "../../devices/device.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";
import { eliminateDeadCode } from "./dce.js";


const sameView = (a: TensorView, b: TensorView) =>
  a.storage === b.storage && a.offset === b.offset && `${a.shape}` === `${b.shape}` && `${a.strides}` === `${b.strides}`;

interface Gather {
  readonly table: TensorView;
  readonly ids: TensorView;
  readonly out: TensorView;
  readonly at: number;
}

/** The nodes with rotary gathers fused (see the file comment); `temporary`: storages that die with the call. */
export function fuseRotaryGather(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const writtenAt = new Map<Storage, number[]>();
  nodes.forEach((n, i) => n.writes.forEach((s) => writtenAt.set(s, [...(writtenAt.get(s) ?? []), i])));
  /** Whether any node in (from, to) writes `s`. */
  const writtenBetween = (s: Storage, from: number, to: number) => (writtenAt.get(s) ?? []).some((i) => i > from && i < to);
  const gathers = new Map<Storage, Gather>();
  nodes.forEach((n, at) => {
    if (n.op !== "embedding") return;
    const [table, ids, out] = n.args as [TensorView, TensorView, TensorView];
    const ok = table.dtype === "float32" && table.shape.length === 2 && isContiguous(table) && isContiguous(ids) && isContiguous(out) && out.dtype === "float32"
      && temporary.has(out.storage) && !outputs.has(out.storage) && (writtenAt.get(out.storage) ?? []).length === 1;
    if (ok) gathers.set(out.storage, { table, ids, out, at });
  });
  if (gathers.size === 0) return [...nodes];
  /** The gather whose whole result is `v` (as [B, L, R] cos/sin), still valid at node `at`. */
  const gatherOf = (v: TensorView, at: number): Gather | null => {
    const g = gathers.get(v.storage);
    const ok = g && v.offset === g.out.offset && numel(v) === numel(g.out) && isContiguous(v) && v.shape.at(-1) === g.table.shape[1]
      && !writtenBetween(g.ids.storage, g.at, at) && !writtenBetween(g.table.storage, g.at, at);
    return ok ? g : null;
  };
  const rewritten = nodes.map((n, at): GraphNode => {
    if (n.op !== "rotaryKVWrite" || n.args[9]) return n;
    const [q, qOut, k, v, cos, sin, kc, vc, slots] = n.args as (TensorView | null)[];
    const c = gatherOf(cos!, at), s = gatherOf(sin!, at);
    if (!c || !s || !sameView(c.ids, s.ids) || numel(c.ids) !== k!.shape[0] * k!.shape[1]) return n;
    const reads = [...n.reads.filter((x) => x !== cos!.storage && x !== sin!.storage), c.table.storage, s.table.storage, c.ids.storage];
    return { op: "rotaryKVWrite", args: [q, qOut, k, v, c.table, s.table, kc, vc, slots, c.ids], reads, writes: n.writes };
  });
  return eliminateDeadCode(rewritten, outputs, temporary);
}
