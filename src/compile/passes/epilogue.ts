/**
 * Epilogue fusion: a `linear` whose result only feeds the very next node, a float32 `binary` add
 * of that result and a residual of the same shape, becomes one `linearAdd` kernel call
 * (devices/kernels.ts), so the matmul writes `x @ w^T + bias + residual` directly (the residual
 * adds of a decoder layer). A `linearQuantized` (a block-quantized weight) becomes
 * `linearAddQuantized` the same way. Runs only on devices that register `linearAdd`, and for
 * quantized weights `linearAddQuantized` (`quantized`).
 */
import type { Storage } from "../../devices/device.js";
import type { BinaryOp, QuantizedWeight } from "../../devices/kernels.js";
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

/** A linear node's input, weight (a float view or a quantized weight), its storages, bias and output. */
function linearOf(n: GraphNode, float: boolean, quantized: boolean) {
  if (n.op === "linear" && float) {
    const [x, w, bias, y] = n.args as [TensorView, TensorView, TensorView | null, TensorView];
    return { op: "linearAdd" as const, x, w: w as TensorView | QuantizedWeight, ws: [w.storage], N: w.shape[0], bias, y };
  }
  if (n.op === "linearQuantized" && quantized) {
    const [x, q, scales, bits, bias, y] = n.args as [TensorView, TensorView, TensorView, 4 | 8, TensorView | null, TensorView];
    return { op: "linearAddQuantized" as const, x, w: { q, scales, bits }, ws: [q.storage, scales.storage], N: q.shape[0], bias, y };
  }
  return null;
}

/** The nodes with linear + residual pairs fused (see the file comment); `temporary`: storages that
 * die with the call; `quantized`: whether linearQuantized nodes fuse too (and `float` linear ones). */
export function fuseLinearEpilogue(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>,
  { float = true, quantized = false } = {}): GraphNode[] {
  const readers = new Map<Storage, number>();
  for (const n of nodes) for (const s of n.reads) readers.set(s, (readers.get(s) ?? 0) + 1);
  const out: GraphNode[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const lin = linearOf(nodes[i], float, quantized), next = nodes[i + 1];
    if (lin && next?.op === "binary") {
      const { x, w, ws, bias, y } = lin;
      const [op, a, b, sum] = next.args as [BinaryOp, TensorView, TensorView, TensorView];
      const [M, N] = [x.shape[0], lin.N];
      const residual = a.storage === y.storage ? b : a;
      const viaY = (v: TensorView) => v.storage === y.storage && v.offset === y.offset;
      const ok = op === "add" && x.dtype === "float32" && x.shape.length === 2 && viaY(a) !== viaY(b)
        && temporary.has(y.storage) && !outputs.has(y.storage) && readers.get(y.storage) === 1 && y.offset === 0
        && [y, a, b, sum].every((v) => rowsOf(v, M, N)) && `${a.shape}` === `${b.shape}`
        && ![x.storage, ...ws, bias?.storage, residual.storage].includes(sum.storage);
      if (ok) {
        out.push({
          op: lin.op, args: [x, w, bias, residual, sum],
          reads: [x.storage, ...ws, ...(bias ? [bias.storage] : []), residual.storage], writes: [sum.storage],
        });
        i++;
        continue;
      }
    }
    out.push(nodes[i]);
  }
  return out;
}
