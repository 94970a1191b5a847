/** Creating tensors from JS values or raw bytes (torch.tensor, zeros, ones, full, arange). */
import type { Device } from "../devices/device.js";
import { getDevice } from "../devices/registry.js";
import { isFloating, itemsize, parseDType, type DType } from "./dtype.js";
import { encode } from "./host.js";
import { numel } from "./shape.js";
import { Tensor } from "./tensor.js";
import { traceObserver } from "./trace.js";

export interface CreateOptions {
  dtype?: DType | string;
  device?: string | Device;
}

type Nested = number | bigint | boolean | Nested[];

function flattenNested(data: Nested, shape: number[], depth: number, out: (number | bigint | boolean)[]): void {
  if (!Array.isArray(data)) {
    if (depth !== shape.length) throw new RangeError("tensor: nested arrays have inconsistent lengths");
    out.push(data);
    return;
  }
  if (depth === shape.length) shape.push(data.length);
  else if (shape[depth] !== data.length) throw new RangeError("tensor: nested arrays have inconsistent lengths");
  for (const d of data) flattenNested(d, shape, depth + 1, out);
}

/**
 * A tensor from a (nested) JS array, a typed array or a scalar (torch.tensor). Default dtype:
 * int64 for integer data (bigint / BigInt64Array / all-integer numbers given as Int32Array -> int32),
 * float32 otherwise, bool for booleans. `shape` may be given for flat data.
 */
export function tensor(data: Nested | ArrayLike<number> | BigInt64Array, opts: CreateOptions & { shape?: number[] } = {}): Tensor {
  let flat: ArrayLike<number | bigint | boolean>;
  let shape: number[] = [];
  let dtype: DType | undefined = opts.dtype ? parseDType(opts.dtype) : undefined;
  if (ArrayBuffer.isView(data)) {
    flat = data as unknown as ArrayLike<number>;
    shape = [flat.length];
    const view: ArrayBufferView = data;
    dtype ??= view instanceof Float32Array ? "float32" : view instanceof Int32Array ? "int32" : view instanceof BigInt64Array ? "int64" : view instanceof Uint8Array ? "bool" : "float32";
  } else {
    const values: (number | bigint | boolean)[] = [];
    flattenNested(data as Nested, shape, 0, values);
    flat = values;
    dtype ??= values.length > 0 && typeof values[0] === "boolean" ? "bool"
      : values.every((v) => typeof v === "bigint") && values.length > 0 ? "int64" : "float32";
  }
  if (opts.shape) {
    if (numel(opts.shape) !== flat.length) throw new RangeError(`tensor: shape [${opts.shape}] does not match ${flat.length} values`);
    shape = opts.shape;
  }
  return fromBytes(encode(flat, dtype), dtype, shape, opts.device ?? "cpu");
}

/**
 * A tensor over raw little-endian bytes (e.g. a safetensors slice). On a host-memory device the
 * bytes are used in place, without a copy: do not modify them afterwards.
 */
export function fromBytes(bytes: Uint8Array, dtype: DType, shape: readonly number[], device: string | Device = "cpu"): Tensor {
  const need = numel(shape) * itemsize(dtype);
  if (bytes.byteLength !== need) throw new RangeError(`fromBytes: ${bytes.byteLength} bytes do not hold a ${dtype} tensor of shape [${shape}] (${need} bytes)`);
  const storage = getDevice(device).upload(bytes);
  traceObserver()?.uploaded(storage, numel(shape));
  return new Tensor(storage, dtype, shape);
}

/** A tensor of `shape` filled with `value` (torch.full). */
export function full(shape: readonly number[], value: number, opts: CreateOptions = {}): Tensor {
  const dtype = opts.dtype ? parseDType(opts.dtype) : "float32";
  const values = new Array<number>(numel(shape)).fill(value);
  return fromBytes(encode(values, dtype), dtype, shape, opts.device ?? "cpu");
}

export const zeros = (shape: readonly number[], opts: CreateOptions = {}) => full(shape, 0, opts);
export const ones = (shape: readonly number[], opts: CreateOptions = {}) => full(shape, 1, opts);

/** [start, end) with `step` (torch.arange); int64 when all arguments are integers, else float32. */
export function arange(start: number, end?: number, step = 1, opts: CreateOptions = {}): Tensor {
  if (end === undefined) [start, end] = [0, start];
  const n = Math.max(0, Math.ceil((end - start) / step));
  const dtype = opts.dtype ? parseDType(opts.dtype) : [start, end, step].every(Number.isInteger) ? "int64" : "float32";
  const values = Array.from({ length: n }, (_, i) => start + i * step);
  if (!isFloating(dtype) && !values.every(Number.isInteger)) throw new RangeError("arange: non-integer values for an integer dtype");
  return fromBytes(encode(values, dtype), dtype, [n], opts.device ?? "cpu");
}
