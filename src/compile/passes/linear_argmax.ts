/**
 * Linear-argmax fusion: a linear (a bias-free float32 `linear`, or a one-weight `linearGroup`
 * without an epilogue, i.e. with its RMS-norm prologue) whose result only the next node reads, an
 * argmax over its last axis, becomes one `linearArgmax` kernel call (devices/kernels.ts): a greedy
 * step's final norm, LM head and argmax in one dispatch, the logits never stored. Runs after the
 * linear grouping, only on devices that register `linearArgmax`.
 */
import type { Storage } from "../../devices/device.js";
import type { LinearGroupNorm, ReduceOp } from "../../devices/kernels.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";
import { readerCounts } from "./readers.js";

/** A contiguous view of `numel` elements. */
const dense = (v: TensorView, n: number) => isContiguous(v) && numel(v) === n;

/** The head's input, norm, weight and logits when `n` is a fusable linear. */
function headOf(n: GraphNode): { x: TensorView; norm: LinearGroupNorm | null; w: TensorView; logits: TensorView } | null {
  if (n.op === "linear") {
    const [x, w, bias, out] = n.args as [TensorView, TensorView, TensorView | null, TensorView];
    const ok = bias === null && x.shape.length === 2 && x.dtype === "float32" && dense(x, x.shape[0] * x.shape[1]) && out.dtype === "float32";
    return ok ? { x, norm: null, w, logits: out } : null;
  }
  if (n.op === "linearGroup") {
    const [x, norm, ws, outs, epilogue] = n.args as [TensorView, LinearGroupNorm | null, TensorView[], TensorView[], unknown];
    return ws.length === 1 && !epilogue ? { x, norm, w: ws[0], logits: outs[0] } : null;
  }
  return null;
}

/** The nodes with linear-argmax pairs fused (see the file comment); `temporary`: storages that die with the call. */
export function fuseLinearArgmax(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const readers = readerCounts(nodes);
  const out: GraphNode[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const head = headOf(nodes[i]), next = nodes[i + 1];
    if (head && next?.op === "reduce") {
      const [op, lx, ids] = next.args as [ReduceOp, TensorView, TensorView];
      const { x, norm, w, logits } = head;
      const [M, N] = [x.shape[0], w.shape[0]];
      const ok = op === "argmax" && lx.storage === logits.storage && lx.offset === logits.offset && lx.shape.at(-1) === N
        && dense(lx, M * N) && dense(logits, M * N) && ids.dtype === "int64" && dense(ids, M)
        && temporary.has(logits.storage) && !outputs.has(logits.storage) && readers.get(logits.storage) === 1
        && ![x.storage, w.storage, norm?.weight.storage].includes(ids.storage);
      if (ok) {
        out.push({ op: "linearArgmax", args: [x, norm, w, ids], reads: [x.storage, ...(norm ? [norm.weight.storage] : []), w.storage], writes: [ids.storage] });
        i++;
        continue;
      }
    }
    out.push(nodes[i]);
  }
  return out;
}
