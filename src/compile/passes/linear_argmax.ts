/**
 * Linear-argmax fusion: a linear (a bias-free float32 `linear`, or a one-weight `linearGroup`
 * without an epilogue, i.e. with its RMS-norm prologue) whose result only the next node reads, an
 * argmax over its last axis, becomes one `linearArgmax` kernel call (devices/kernels.ts): a greedy
 * step's final norm, LM head and argmax in one dispatch, the logits never stored. A block-quantized
 * head (a bias-free `linearQuantized`, or a one-weight `linearGroupQuantized` without an epilogue)
 * becomes `linearArgmaxQuantized` the same way. Runs after the linear grouping, only on devices
 * that register `linearArgmax` (float heads) or `linearArgmaxQuantized` (quantized ones).
 */
import type { Storage } from "../../devices/device.js";
import type { LinearGroupNorm, OpName, QuantizedWeight, ReduceOp } from "../../devices/kernels.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";
import { readerCounts } from "./readers.js";

/** A contiguous view of `numel` elements. */
const dense = (v: TensorView, n: number) => isContiguous(v) && numel(v) === n;

/** A head's fused op, input, norm, weight (a float view or a quantized weight), the weight's storages and logits. */
interface Head { op: OpName; x: TensorView; norm: LinearGroupNorm | null; w: TensorView | QuantizedWeight; storages: Storage[]; logits: TensorView }

/** The head when `n` is a fusable linear of a kind that fuses (`float`, `quantized`). */
function headOf(n: GraphNode, float: boolean, quantized: boolean): Head | null {
  const input = (x: TensorView) => x.shape.length === 2 && x.dtype === "float32" && dense(x, x.shape[0] * x.shape[1]);
  if (n.op === "linear" && float) {
    const [x, w, bias, out] = n.args as [TensorView, TensorView, TensorView | null, TensorView];
    return bias === null && input(x) && out.dtype === "float32" ? { op: "linearArgmax", x, norm: null, w, storages: [w.storage], logits: out } : null;
  }
  if (n.op === "linearQuantized" && quantized) {
    const [x, q, scales, bits, bias, out] = n.args as [TensorView, TensorView, TensorView, 4 | 8, TensorView | null, TensorView];
    return bias === null && input(x) ? { op: "linearArgmaxQuantized", x, norm: null, w: { q, scales, bits }, storages: [q.storage, scales.storage], logits: out } : null;
  }
  if ((n.op === "linearGroup" && float) || (n.op === "linearGroupQuantized" && quantized)) {
    const [x, norm, ws, outs, epilogue] = n.args as [TensorView, LinearGroupNorm | null, (TensorView | QuantizedWeight)[], TensorView[], unknown];
    const w = ws[0];
    const storages = "bits" in w ? [w.q.storage, w.scales.storage] : [w.storage];
    return ws.length === 1 && !epilogue ? { op: n.op === "linearGroup" ? "linearArgmax" : "linearArgmaxQuantized", x, norm, w, storages, logits: outs[0] } : null;
  }
  return null;
}

/** The nodes with linear-argmax pairs fused (see the file comment); `temporary`: storages that die
 * with the call; `float` / `quantized`: which head kinds fuse (the device's registered forms). */
export function fuseLinearArgmax(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>,
  { float = true, quantized = false } = {}): GraphNode[] {
  const readers = readerCounts(nodes);
  const out: GraphNode[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const head = headOf(nodes[i], float, quantized), next = nodes[i + 1];
    if (head && next?.op === "reduce") {
      const [op, lx, ids] = next.args as [ReduceOp, TensorView, TensorView];
      const { x, norm, w, storages, logits } = head;
      const [M, N] = [x.shape[0], logits.shape.at(-1)!];
      const ok = op === "argmax" && lx.storage === logits.storage && lx.offset === logits.offset && lx.shape.at(-1) === N
        && dense(lx, M * N) && dense(logits, M * N) && ids.dtype === "int64" && dense(ids, M)
        && temporary.has(logits.storage) && !outputs.has(logits.storage) && readers.get(logits.storage) === 1
        && ![x.storage, ...storages, norm?.weight.storage].includes(ids.storage);
      if (ok) {
        out.push({ op: head.op, args: [x, norm, w, ids], reads: [x.storage, ...(norm ? [norm.weight.storage] : []), ...storages], writes: [ids.storage] });
        i++;
        continue;
      }
    }
    out.push(nodes[i]);
  }
  return out;
}
