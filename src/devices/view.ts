/**
 * What a kernel receives for each operand: a plain strided view of device memory (shape, strides
 * and offset in elements, dtype, storage). tensor/'s Tensor is one; kernels never see more, so
 * devices/ depends on nothing above it.
 */
import type { Device, Storage } from "./device.js";
import type { DType } from "./dtype.js";
import { itemsize } from "./dtype.js";

export interface TensorView {
  readonly storage: Storage;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Elements to step per index of each dimension (0 = broadcast). */
  readonly strides: readonly number[];
  /** Offset of element [0, …, 0] in the storage, in elements. */
  readonly offset: number;
}

/** Number of elements of `v`. */
export function numel(v: { readonly shape: readonly number[] }): number {
  return v.shape.reduce((a, b) => a * b, 1);
}

/** Whether `v` is row-major contiguous (strides of size-1 dimensions are ignored). */
export function isContiguous(v: TensorView): boolean {
  let expect = 1;
  for (let d = v.shape.length - 1; d >= 0; d--) {
    if (v.shape[d] !== 1 && v.strides[d] !== expect) return false;
    expect *= v.shape[d];
  }
  return true;
}

/** Byte offset of element [0, …, 0] of `v` in its storage. */
export function byteOffset(v: TensorView): number {
  return v.offset * itemsize(v.dtype);
}

/** A contiguous view of `shape` over fresh (uninitialised) memory of `device`. */
export function allocateView(device: Device, dtype: DType, shape: readonly number[]): TensorView {
  const strides: number[] = new Array(shape.length);
  for (let i = shape.length - 1, s = 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  const storage = device.allocate(numel({ shape }) * itemsize(dtype));
  return { storage, dtype, shape: [...shape], strides, offset: 0 };
}
