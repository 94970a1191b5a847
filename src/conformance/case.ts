/**
 * A conformance case: host inputs (each placed on the device as a contiguous tensor or as a
 * non-contiguous view holding the same values), the computation through the tensor API, and the
 * float64 reference outputs with their tolerance, or the error every device must raise.
 */
import type { Device } from "../devices/device.js";
import type { OpName } from "../devices/kernels.js";
import { fromBytes } from "../tensor/creation.js";
import type { DType } from "../tensor/dtype.js";
import { encode } from "../tensor/host.js";
import type { Tensor } from "../tensor/tensor.js";
import { dtypeEps, host, numel, roundFloat, unravel, type HostTensor, type Tolerance, type Value } from "./reference.js";

/**
 * How an input is laid out on the device: contiguous; "transposed" (the last two dims swapped in
 * memory, then transposed back); "strided" (every other element of a wider last dim, NaN
 * between); "offset" (starting 3 elements into a larger buffer).
 */
export type View = "contiguous" | "transposed" | "strided" | "offset";

export interface Input {
  t: HostTensor;
  view: View;
}

export interface Expected {
  dtype: DType;
  shape: number[];
  values: Value[];
  /** Per-element magnitude the tolerance scales with (default: |value|). */
  mag?: number[];
}

export interface Case {
  /** The tensor-API op under test (the per-op table groups by it). */
  op: string;
  name: string;
  inputs: Input[];
  run(xs: Tensor[]): Tensor | Tensor[];
  /** Reference outputs, or the error class the call (or reading its result) must throw. */
  expect: Expected[] | { throws: "RangeError" | "TypeError" };
  tol: Tolerance;
  /** A kernel only some devices have (e.g. cpu-only quantized weights): elsewhere the case is
   * listed as not run (Report.notRun) instead of failing. Undefined = every device must run it. */
  kernel?: OpName;
  /**
   * Float arithmetic: the reference recomputed from `inputs`, as a device that flushes float32
   * subnormals would compute it (./flush.ts: the runner passes every combination of flushed
   * inputs; float32 intermediates of a staged definition are flushed here). Absent: data movement
   * (copies, casts, where), bit-exact on every device.
   */
  reference?: (inputs: HostTensor[]) => Expected[];
}

export function input(t: HostTensor, view: View = "contiguous"): Input {
  return { t, view };
}

/** Put an input on `device` with its view's layout; its logical values equal `input.t`. */
export function place(inp: Input, device: Device): Tensor {
  const { t, view } = inp;
  const upload = (dtype: DType, shape: number[], values: Value[]) =>
    fromBytes(encode(values as (number | bigint)[], dtype), dtype, shape, "cpu").to(device);
  const filler: Value = t.dtype === "int64" ? 7n : t.dtype === "bool" ? 1 : t.dtype === "int32" ? 7 : NaN;
  const nd = t.shape.length;
  switch (view) {
    case "contiguous":
      return upload(t.dtype, t.shape, t.values);
    case "transposed": {
      if (nd < 2) return upload(t.dtype, t.shape, t.values);
      const shape = [...t.shape.slice(0, -2), t.shape[nd - 1], t.shape[nd - 2]];
      const values = new Array<Value>(t.values.length);
      for (let i = 0; i < values.length; i++) {
        const idx = unravel(i, shape);
        [idx[nd - 1], idx[nd - 2]] = [idx[nd - 2], idx[nd - 1]];
        values[i] = t.values[flatIndex(idx, t.shape)];
      }
      return upload(t.dtype, shape, values).transpose(-1, -2);
    }
    case "strided": {
      if (nd === 0) return upload(t.dtype, t.shape, t.values);
      const n = t.shape[nd - 1];
      const wide = [...t.shape.slice(0, -1), 2 * n + 1];
      const values = new Array<Value>(numel(wide)).fill(filler);
      t.values.forEach((v, i) => { values[Math.floor(i / n) * (2 * n + 1) + 1 + 2 * (i % n)] = v; });
      return upload(t.dtype, wide, values).slice(-1, 1, 2 * n + 1, 2);
    }
    case "offset": {
      const values = [filler, filler, filler, ...t.values, filler];
      return upload(t.dtype, [values.length], values).narrow(0, 3, t.values.length).view(t.shape);
    }
  }
}

function flatIndex(idx: readonly number[], shape: readonly number[]): number {
  return idx.reduce((acc, v, d) => acc * shape[d] + v, 0);
}

/** Expected float output: float64 values rounded to `dtype`, with optional magnitudes. */
export function floats(dtype: DType, shape: number[], values: number[], mag?: number[]): Expected {
  return { dtype, shape, values: values.map((v) => roundFloat(v, dtype)), mag };
}

/** Expected output of any dtype, values as given. */
export function exact(t: HostTensor): Expected {
  return { dtype: t.dtype, shape: t.shape, values: t.values };
}

/** A tolerance of `ulps` float32 ulps (relative) plus the rounding of a narrower output dtype. */
export function ulps(n: number, dtype: DType = "float32", atol = 2 ** -126): Tolerance {
  return { rtol: n * 2 ** -23 + 2 * dtypeEps(dtype), atol };
}

/** Deterministic pseudo-random numbers (mulberry32). */
export class Rng {
  constructor(private state: number) {}
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) | 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Uniform in [lo, hi), rounded to float32. */
  uniform(lo: number, hi: number): number {
    return Math.fround(lo + (hi - lo) * this.next());
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor((hi - lo) * this.next());
  }
  /** A float tensor of uniform values, exactly representable in `dtype`. */
  tensor(shape: number[], lo = -3, hi = 3, dtype: DType = "float32"): HostTensor {
    return host(dtype, shape, Array.from({ length: numel(shape) }, () => roundFloat(this.uniform(lo, hi), dtype)));
  }
  ints(shape: number[], lo: number, hi: number, dtype: DType = "int64"): HostTensor {
    return host(dtype, shape, Array.from({ length: numel(shape) }, () => (dtype === "int64" ? BigInt(this.int(lo, hi)) : this.int(lo, hi))));
  }
}
