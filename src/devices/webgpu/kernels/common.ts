/**
 * Helpers shared by the webgpu kernels: the device and buffer of a tensor, and strided iteration
 * (a shape walked in row-major order, each operand read through its own element offset and
 * strides, as the cpu addon's for_each_strided). Views at any element offset are handled by
 * passing offsets as parameters and binding whole buffers.
 */
import type { TensorView } from "../../view.js";
import type { WebGPUDevice } from "../device.js";

/** Dimensions a strided kernel handles after merging (more throws). */
export const MAX_DIMS = 8;

export function deviceOf(t: TensorView): WebGPUDevice {
  return t.storage.device as WebGPUDevice;
}

export function bufferOf(t: TensorView): GPUBuffer {
  return t.storage.handle as GPUBuffer;
}

/**
 * The iteration space of `shape` over operands with `strides`: size-1 dims dropped and
 * neighbours merged where every operand allows it (dims i, i+1 merge when, for every operand,
 * stride[i] == stride[i+1] * shape[i+1]). Always at least one dim.
 */
export function mergeDims(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  shape.forEach((size, d) => {
    if (size === 1) return;
    const last = outShape.length - 1;
    if (last >= 0 && strides.every((s, k) => outStrides[k][last] === s[d] * size)) {
      outShape[last] *= size;
      strides.forEach((s, k) => { outStrides[k][last] = s[d]; });
    } else {
      outShape.push(size);
      strides.forEach((s, k) => outStrides[k].push(s[d]));
    }
  });
  if (outShape.length === 0) {
    outShape.push(1);
    outStrides.forEach((s) => s.push(0));
  }
  if (outShape.length > MAX_DIMS) throw new RangeError(`webgpu: strided kernels support at most ${MAX_DIMS} non-mergeable dimensions, got ${outShape.length}`);
  return { shape: outShape, strides: outStrides };
}

/**
 * Parameters of a strided walk over `operands` (all of `shape`): [n, ndim, shape x8, then per
 * operand: offset, strides x8]. Pair with {@link stridedOffsets}.
 */
export function stridedParams(shape: readonly number[], operands: readonly TensorView[]): number[] {
  const m = mergeDims(shape, operands.map((t) => t.strides));
  const pad = (xs: number[]) => [...xs, ...new Array<number>(MAX_DIMS - xs.length).fill(0)];
  const n = shape.reduce((a, b) => a * b, 1);
  return [n, m.shape.length, ...pad(m.shape), ...operands.flatMap((t, k) => [t.offset, ...pad(m.strides[k])])];
}

/** WGSL declaring `o0 … o{count-1}`: the element offsets of each operand at flat index `i`. */
export function stridedOffsets(count: number): string {
  const base = (k: number) => 2 + MAX_DIMS + k * (MAX_DIMS + 1);
  const decl = Array.from({ length: count }, (_, k) => `var o${k} = pu(${base(k)}u);`).join(" ");
  const step = Array.from({ length: count }, (_, k) => `o${k} = o${k} + c * pu(${base(k)}u + d);`).join(" ");
  return `${decl}
  var rem = i;
  for (var d = pu(1u); d > 0u; d = d - 1u) {
    let s = pu(1u + d);
    let c = rem % s;
    rem = rem / s;
    ${step}
  }`;
}
