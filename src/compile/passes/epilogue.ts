/**
 * Epilogue fusion: a `linear` whose result only feeds the very next node, a float32 `binary` add
 * of that result and a residual of the same shape, becomes one `linearAdd` kernel call
 * (devices/kernels.ts), so the matmul writes `x @ w^T + bias + residual` directly (the residual
 * adds of a decoder layer). Runs only on devices that register `linearAdd`.
 */
import type { Storage } from "../../devices/device.js";
import type { BinaryOp } from "../../devices/kernels.js";
import type { TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";

/** A contiguous float32 view of M*N elements whose last dimension is N (any leading shape). */
function rowsOf(v: TensorView, m: number, n: number): boolean {
  let expect = 1;
  for (let d = v.shape.length - 1; d >= 0; d--) {
    if (v.shape[d] !== 1 && v.strides[d] !== expect) return false;
    expect *= v.shape[d];
  }
  return v.dtype === "float32" && v.shape.at(-1) === n && expect === m * n;
}

export function fuseLinearEpilogue(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const readers = new Map<Storage, number>();
  for (const n of nodes) for (const s of n.reads) readers.set(s, (readers.get(s) ?? 0) + 1);
  const out: GraphNode[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const lin = nodes[i], next = nodes[i + 1];
    if (lin.op === "linear" && next?.op === "binary") {
      const [x, w, bias, y] = lin.args as [TensorView, TensorView, TensorView | null, TensorView];
      const [op, a, b, sum] = next.args as [BinaryOp, TensorView, TensorView, TensorView];
      const [M, N] = [x.shape[0], w.shape[0]];
      const residual = a.storage === y.storage ? b : a;
      const viaY = (v: TensorView) => v.storage === y.storage && v.offset === y.offset;
      const ok = op === "add" && x.dtype === "float32" && x.shape.length === 2 && viaY(a) !== viaY(b)
        && temporary.has(y.storage) && !outputs.has(y.storage) && readers.get(y.storage) === 1 && y.offset === 0
        && [y, a, b, sum].every((v) => rowsOf(v, M, N)) && `${a.shape}` === `${b.shape}`
        && ![x.storage, w.storage, bias?.storage, residual.storage].includes(sum.storage);
      if (ok) {
        out.push({
          op: "linearAdd", args: [x, w, bias, residual, sum],
          reads: [x.storage, w.storage, ...(bias ? [bias.storage] : []), residual.storage], writes: [sum.storage],
        });
        i++;
        continue;
      }
    }
    out.push(lin);
  }
  return out;
}
