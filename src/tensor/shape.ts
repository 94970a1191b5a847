/** Shape and stride helpers (pure functions on number arrays; strides are in elements). */

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Row-major (C-contiguous) strides of a shape. */
export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

/** Normalise a possibly negative axis; throws on out of range. */
export function normAxis(axis: number, ndim: number, what = "dim"): number {
  const a = axis < 0 ? axis + ndim : axis;
  if (!Number.isInteger(a) || a < 0 || a >= Math.max(ndim, 1)) {
    throw new RangeError(`${what} ${axis} is out of range for a tensor with ${ndim} dimensions`);
  }
  return a;
}

/** NumPy/PyTorch broadcasting of two shapes; throws naming both shapes when incompatible. */
export function broadcastShapes(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1;
    const db = b[b.length - n + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new RangeError(`shapes [${a}] and [${b}] cannot be broadcast together`);
    }
    out[i] = da === 1 ? db : da;
  }
  return out;
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Resolve one -1 in a target shape for view/reshape; throws on a size mismatch. */
export function inferShape(shape: readonly number[], total: number): number[] {
  const out = [...shape];
  const neg = out.indexOf(-1);
  if (neg !== out.lastIndexOf(-1)) throw new RangeError("only one dimension can be inferred (-1)");
  if (neg >= 0) {
    const rest = numel(out.filter((_, i) => i !== neg));
    if (rest === 0 || total % rest !== 0) throw new RangeError(`shape [${shape}] is invalid for input of size ${total}`);
    out[neg] = total / rest;
  }
  if (out.some((d) => !Number.isInteger(d) || d < 0) || numel(out) !== total) {
    throw new RangeError(`shape [${shape}] is invalid for input of size ${total}`);
  }
  return out;
}
