/**
 * Tensor: a strided view (shape, strides, element offset) of a device Storage, with a dtype.
 * View ops (view/reshape, transpose/permute, slice/narrow, expand, (un)squeeze) only change
 * metadata and share storage, as in PyTorch; everything that computes goes through tensor/ops.ts,
 * which dispatches to the kernel registered for the storage's device.
 *
 * Reading values is explicit and async: `await t.data()`, `await t.item()`, `await t.tolist()`.
 */
import type { Device, Storage } from "../devices/device.js";
import type { TensorView } from "../devices/view.js";
import { getDevice } from "../devices/registry.js";
import type { DType } from "./dtype.js";
import { itemsize, parseDType } from "./dtype.js";
import { decode, type HostArray } from "./host.js";
import { contiguousStrides, inferShape, normAxis, numel, sameShape } from "./shape.js";
import * as ops from "./ops.js";
import { traceObserver } from "./trace.js";

export type Scalar = number;
export type TensorLike = Tensor | Scalar;

export class Tensor implements TensorView {
  readonly storage: Storage;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  /** Offset of element [0, …, 0] in the storage, in elements. */
  readonly offset: number;

  constructor(storage: Storage, dtype: DType, shape: readonly number[], strides?: readonly number[], offset = 0) {
    this.storage = storage;
    this.dtype = dtype;
    // Copies, read-only by type but not frozen: Object.freeze on every tensor's two arrays cost
    // ~0.4 ms per decode token of a 28-layer model (JS time alone, AMD EPYC Zen 5).
    this.shape = [...shape];
    this.strides = strides ? [...strides] : contiguousStrides(shape);
    this.offset = offset;
  }

  get device(): Device { return this.storage.device; }
  get ndim(): number { return this.shape.length; }
  get numel(): number { return numel(this.shape); }
  /** Byte offset of element [0, …, 0] in the storage. */
  get byteOffset(): number { return this.offset * itemsize(this.dtype); }
  get isContiguous(): boolean {
    let s = 1;
    for (let i = this.shape.length - 1; i >= 0; i--) {
      if (this.shape[i] !== 1 && this.strides[i] !== s) return false;
      s *= this.shape[i];
    }
    return true;
  }

  size(dim?: number): number | readonly number[] {
    return dim === undefined ? this.shape : this.shape[normAxis(dim, this.ndim)];
  }

  toString(): string {
    return `Tensor(shape=[${this.shape}], dtype=${this.dtype}, device=${this.device.name})`;
  }

  // ---------------------------------------------------------------- views (no data movement)

  private withView(shape: readonly number[], strides: readonly number[], offset = this.offset): Tensor {
    return new Tensor(this.storage, this.dtype, shape, strides, offset);
  }

  /** View with a new shape (one dim may be -1). Throws when the strides do not allow a view. */
  view(...shape: number[] | [number[]]): Tensor {
    const target = inferShape((Array.isArray(shape[0]) ? shape[0] : shape) as number[], this.numel);
    const strides = viewStrides(this.shape, this.strides, target);
    if (!strides) {
      throw new Error(`view size [${target}] is not compatible with input tensor's size and stride ([${this.shape}], [${this.strides}]); use reshape`);
    }
    return this.withView(target, strides);
  }

  /** Like view, but copies when the layout does not allow a view (as torch.reshape). */
  reshape(...shape: number[] | [number[]]): Tensor {
    const target = inferShape((Array.isArray(shape[0]) ? shape[0] : shape) as number[], this.numel);
    const strides = viewStrides(this.shape, this.strides, target);
    return strides ? this.withView(target, strides) : this.contiguous().view(target);
  }

  flatten(startDim = 0, endDim = -1): Tensor {
    if (this.ndim === 0) return this.reshape(1);
    const s = normAxis(startDim, this.ndim), e = normAxis(endDim, this.ndim);
    return this.reshape([...this.shape.slice(0, s), numel(this.shape.slice(s, e + 1)), ...this.shape.slice(e + 1)]);
  }

  permute(...dims: number[] | [number[]]): Tensor {
    const d = ((Array.isArray(dims[0]) ? dims[0] : dims) as number[]).map((x) => normAxis(x, this.ndim));
    if (d.length !== this.ndim || new Set(d).size !== d.length) {
      throw new RangeError(`permute dims [${d}] do not match a tensor with ${this.ndim} dimensions`);
    }
    return this.withView(d.map((i) => this.shape[i]), d.map((i) => this.strides[i]));
  }

  transpose(dim0: number, dim1: number): Tensor {
    const d = [...this.shape.keys()];
    const a = normAxis(dim0, this.ndim), b = normAxis(dim1, this.ndim);
    [d[a], d[b]] = [d[b], d[a]];
    return this.permute(d);
  }

  /** Matrix transpose of a 2-D tensor. */
  get T(): Tensor {
    if (this.ndim !== 2) throw new RangeError(`.T expects a 2-D tensor, got ${this.ndim}-D`);
    return this.transpose(0, 1);
  }

  unsqueeze(dim: number): Tensor {
    const d = normAxis(dim, this.ndim + 1);
    const shape = [...this.shape], strides = [...this.strides];
    shape.splice(d, 0, 1);
    strides.splice(d, 0, d < this.ndim ? this.strides[d] * this.shape[d] : 1);
    return this.withView(shape, strides);
  }

  squeeze(dim?: number): Tensor {
    const keep = (i: number) => (dim === undefined ? this.shape[i] !== 1 : i !== normAxis(dim, this.ndim) || this.shape[i] !== 1);
    const idx = [...this.shape.keys()].filter(keep);
    return this.withView(idx.map((i) => this.shape[i]), idx.map((i) => this.strides[i]));
  }

  /** Broadcast to `shape` (size-1 dims and new leading dims get stride 0); -1 keeps a size. */
  expand(...shape: number[] | [number[]]): Tensor {
    const target = (Array.isArray(shape[0]) ? shape[0] : shape) as number[];
    const lead = target.length - this.ndim;
    if (lead < 0) throw new RangeError(`cannot expand [${this.shape}] to [${target}]`);
    const outShape: number[] = [], strides: number[] = [];
    target.forEach((t, i) => {
      const src = i - lead;
      const have = src >= 0 ? this.shape[src] : 1;
      const size = t === -1 ? have : t;
      if (src >= 0 && have !== size && have !== 1) throw new RangeError(`cannot expand [${this.shape}] to [${target}]`);
      outShape.push(size);
      strides.push(src >= 0 && have === size ? this.strides[src] : 0);
    });
    return this.withView(outShape, strides);
  }

  /** Elements start..end (exclusive, negative counts from the end, clamped) of `dim`, with a step. */
  slice(dim: number, start = 0, end = Infinity, step = 1): Tensor {
    const d = normAxis(dim, this.ndim);
    const n = this.shape[d];
    const clamp = (x: number) => Math.min(Math.max(x < 0 ? x + n : x, 0), n);
    const s = clamp(start), e = Math.max(clamp(end), s);
    if (step < 1 || !Number.isInteger(step)) throw new RangeError(`slice step must be a positive integer, got ${step}`);
    const shape = [...this.shape], strides = [...this.strides];
    shape[d] = Math.ceil((e - s) / step);
    strides[d] = this.strides[d] * step;
    return this.withView(shape, strides, this.offset + s * this.strides[d]);
  }

  /** torch.narrow: `length` elements of `dim` from `start`. */
  narrow(dim: number, start: number, length: number): Tensor {
    const d = normAxis(dim, this.ndim);
    if (start < 0) start += this.shape[d];
    if (start < 0 || length < 0 || start + length > this.shape[d]) {
      throw new RangeError(`narrow(${dim}, ${start}, ${length}) is out of range for size ${this.shape[d]}`);
    }
    return this.slice(d, start, start + length);
  }

  /** Index `index` of `dim`, removing that dim (torch.select). */
  select(dim: number, index: number): Tensor {
    const d = normAxis(dim, this.ndim);
    const i = index < 0 ? index + this.shape[d] : index;
    if (i < 0 || i >= this.shape[d]) throw new RangeError(`index ${index} is out of range for dim ${dim} of size ${this.shape[d]}`);
    return this.narrow(d, i, 1).squeeze(d);
  }

  /** Split `dim` into chunks of `size` (the last may be smaller). */
  split(size: number, dim = 0): Tensor[] {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`split size must be a positive integer, got ${size}`);
    const d = normAxis(dim, this.ndim);
    const out: Tensor[] = [];
    for (let s = 0; s < this.shape[d]; s += size) out.push(this.slice(d, s, s + size));
    return out;
  }

  /** Split `dim` into `chunks` nearly equal parts (torch.chunk). */
  chunk(chunks: number, dim = 0): Tensor[] {
    if (!Number.isInteger(chunks) || chunks < 1) throw new RangeError(`chunk count must be a positive integer, got ${chunks}`);
    return this.split(Math.ceil(this.shape[normAxis(dim, this.ndim)] / chunks), dim);
  }

  // ---------------------------------------------------------------- movement and reading

  /** A contiguous tensor with the same values (this tensor itself when already contiguous). */
  contiguous(): Tensor {
    return this.isContiguous ? this : ops.copyTo(this, this.dtype, this.device);
  }

  /** Move to a device ("cpu", "webgpu") and/or convert the dtype; returns `this` when nothing changes. */
  to(deviceOrDtype: string | Device, dtype?: DType | string): Tensor {
    let device = this.device, dt = this.dtype;
    if (typeof deviceOrDtype === "string" && isDTypeName(deviceOrDtype)) dt = parseDType(deviceOrDtype);
    else device = getDevice(deviceOrDtype);
    if (dtype !== undefined) dt = parseDType(dtype);
    if (device === this.device && dt === this.dtype) return this;
    return ops.copyTo(this, dt, device);
  }

  /**
   * Like `to`, but waits for the source device, so it also moves tensors off devices whose memory
   * the host cannot read synchronously (webgpu -> cpu).
   */
  async toAsync(device: string | Device, dtype?: DType | string): Promise<Tensor> {
    const dev = getDevice(device);
    const dt = dtype === undefined ? this.dtype : parseDType(dtype);
    if (dev === this.device || this.device.readSync) return this.to(dev, dt);
    const c = this.contiguous();
    traceObserver()?.read("toAsync()");
    const bytes = await c.device.read(c.storage, c.byteOffset, c.numel * itemsize(c.dtype));
    return new Tensor(dev.upload(bytes), c.dtype, c.shape).to(dt);
  }

  /** Convert dtype (torch.Tensor.to(dtype)). */
  cast(dtype: DType | string): Tensor { return this.to(parseDType(dtype)); }

  /** All values, row-major, as a host typed array (float16/bfloat16 are widened to Float32Array). */
  async data(): Promise<HostArray> {
    const c = this.contiguous();
    traceObserver()?.read("data()");
    const bytes = await c.device.read(c.storage, c.byteOffset, c.numel * itemsize(c.dtype));
    return decode(bytes, c.dtype);
  }

  /** The value of a one-element tensor as a JS number (int64 converted with Number()). */
  async item(): Promise<number> {
    if (this.numel !== 1) throw new RangeError(`item() needs a tensor with one element, got shape [${this.shape}]`);
    return Number((await this.data())[0]);
  }

  /** Values as nested JS arrays of numbers. */
  async tolist(): Promise<unknown> {
    const flat = Array.from(await this.data(), Number);
    const build = (dim: number, start: number): unknown => {
      if (dim === this.ndim) return flat[start];
      const inner = numel(this.shape.slice(dim + 1));
      return Array.from({ length: this.shape[dim] }, (_, i) => build(dim + 1, start + i * inner));
    };
    return build(0, 0);
  }

  // ---------------------------------------------------------------- op shorthands (see ops.ts)

  add(other: TensorLike): Tensor { return ops.add(this, other); }
  sub(other: TensorLike): Tensor { return ops.sub(this, other); }
  mul(other: TensorLike): Tensor { return ops.mul(this, other); }
  div(other: TensorLike): Tensor { return ops.div(this, other); }
  pow(other: TensorLike): Tensor { return ops.pow(this, other); }
  neg(): Tensor { return ops.neg(this); }
  matmul(other: Tensor): Tensor { return ops.matmul(this, other); }
  sum(dim?: number, keepdim = false): Tensor { return ops.sum(this, dim, keepdim); }
  mean(dim?: number, keepdim = false): Tensor { return ops.mean(this, dim, keepdim); }
  max(dim?: number, keepdim = false): Tensor { return ops.max(this, dim, keepdim); }
  argmax(dim?: number, keepdim = false): Tensor { return ops.argmax(this, dim, keepdim); }
  softmax(dim: number): Tensor { return ops.softmax(this, dim); }
  maskedFill(mask: Tensor, value: number): Tensor { return ops.maskedFill(this, mask, value); }
}

function isDTypeName(s: string): boolean {
  try { parseDType(s); return true; } catch { return false; }
}

/**
 * Strides for viewing (shape, strides) as `target` without copying, or null when impossible
 * (PyTorch's computeStride: each run of merged dims must be contiguous within itself).
 */
function viewStrides(shape: readonly number[], strides: readonly number[], target: readonly number[]): number[] | null {
  if (sameShape(shape, target)) return [...strides];
  if (numel(shape) === 0 || shape.length === 0) return contiguousStrides(target);
  const out = new Array<number>(target.length);
  let vd = target.length - 1;
  let chunkBase = strides[strides.length - 1];
  let tensorNumel = 1, viewNumel = 1;
  for (let td = shape.length - 1; td >= 0; td--) {
    tensorNumel *= shape[td];
    if (td === 0 || (shape[td - 1] !== 1 && strides[td - 1] !== tensorNumel * chunkBase)) {
      while (vd >= 0 && (viewNumel < tensorNumel || target[vd] === 1)) {
        out[vd] = viewNumel * chunkBase;
        viewNumel *= target[vd];
        vd--;
      }
      if (viewNumel !== tensorNumel) return null;
      if (td > 0) {
        chunkBase = strides[td - 1];
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  return vd === -1 ? out : null;
}
