/**
 * Attention-projection fusion: a `pagedAttention` whose output only the next node reads, a
 * `linearAdd` (the output projection and the residual add, made by the epilogue fusion) taking
 * that output as its [T, Hq * Dv] input, becomes one `pagedAttentionLinearAdd` kernel call
 * (devices/kernels.ts): a decoder layer's attention, o_proj and residual in one dispatch. Runs
 * after the epilogue fusion, only on devices that register `pagedAttentionLinearAdd`.
 */
import type { Storage } from "../../devices/device.js";
import type { PagedAttentionParams } from "../../devices/kernels.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";
import { readerCounts } from "./readers.js";

const dense = (v: TensorView, n: number) => isContiguous(v) && numel(v) === n && v.dtype === "float32";

type AttentionArgs = [TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, PagedAttentionParams];
type LinearAddArgs = [TensorView, TensorView, TensorView | null, TensorView, TensorView];

/** The nodes with attention + projection pairs fused (see the file comment); `temporary`: storages that die with the call. */
export function fuseAttentionOut(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const readers = readerCounts(nodes);
  const out: GraphNode[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i], next = nodes[i + 1];
    if (n.op === "pagedAttention" && next?.op === "linearAdd") {
      const [q, kc, vc, tables, seq, pos, att, p] = n.args as AttentionArgs;
      const [x, w, bias, residual, y] = next.args as LinearAddArgs;
      const [T, Hq] = q.shape, Dv = vc.shape[3];
      const ok = x.storage === att.storage && x.offset === att.offset && x.shape.length === 2 && x.shape[0] === T && x.shape[1] === Hq * Dv
        && dense(x, T * Hq * Dv) && dense(att, T * Hq * Dv)
        && temporary.has(att.storage) && !outputs.has(att.storage) && readers.get(att.storage) === 1
        && ![q, kc, vc, tables, seq, pos].some((v) => v.storage === y.storage);
      if (ok) {
        out.push({
          op: "pagedAttentionLinearAdd", args: [q, kc, vc, tables, seq, pos, p, w, bias, residual, y],
          reads: [...n.reads.filter((s) => s !== att.storage), ...next.reads.filter((s) => s !== att.storage)], writes: [y.storage],
        });
        i++;
        continue;
      }
    }
    out.push(n);
  }
  return out;
}
