/**
 * Host-side references for the conformance suite: tensors as plain JS values (number, or bigint
 * for int64), the dtype rules of the cpu device (casts that truncate and saturate, round-to-
 * nearest-even into float32/float16/bfloat16), and float64 implementations of every op. Results
 * are exact in float64 (or as exact as float64 allows); the suite compares device outputs with
 * them under per-op tolerances.
 */
import type { DType } from "../tensor/dtype.js";
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "../tensor/host.js";

export type Value = number | bigint;

/** A tensor on the host: row-major values of `shape`. */
export interface HostTensor {
  dtype: DType;
  shape: number[];
  values: Value[];
}

export function host(dtype: DType, shape: number[], values: Value[]): HostTensor {
  if (values.length !== numel(shape)) throw new Error(`host: ${values.length} values for shape [${shape}]`);
  return { dtype, shape, values };
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

/** Multi-index of flat position `i` in `shape`. */
export function unravel(i: number, shape: readonly number[]): number[] {
  const idx = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    idx[d] = i % shape[d];
    i = Math.floor(i / shape[d]);
  }
  return idx;
}

/** Value of `t` at multi-index `idx` of a shape `t` broadcasts to (NumPy rules). */
export function at(t: HostTensor, idx: readonly number[]): Value {
  const lead = idx.length - t.shape.length;
  let flat = 0;
  const st = stridesOf(t.shape);
  t.shape.forEach((s, d) => { flat += (s === 1 ? 0 : idx[lead + d]) * st[d]; });
  return t.values[flat];
}

export function broadcastShape(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  return Array.from({ length: n }, (_, i) => {
    const x = a[a.length - n + i] ?? 1, y = b[b.length - n + i] ?? 1;
    return x === 1 ? y : x;
  });
}

// ------------------------------------------------------------------ dtype rules

const I64_MIN = -(2n ** 63n), I64_MAX = 2n ** 63n - 1n;

/** bigint -> float32, rounded once to nearest even (as the cpu's int64 -> float conversion). */
export function bigintToF32(b: bigint): number {
  const neg = b < 0n;
  let a = neg ? -b : b;
  if (a < 2n ** 53n) return Math.fround(Number(b));
  const shift = a.toString(2).length - 26;
  const sticky = (a & ((1n << BigInt(shift)) - 1n)) !== 0n ? 1n : 0n;
  a = (a >> BigInt(shift)) | sticky;
  const r = Math.fround(Number(a)) * 2 ** shift;
  return neg ? -r : r;
}

/** Float (already float32) -> integer of `bits` bits: truncate, NaN -> 0, saturate. */
function floatToInt(x: number, bits: 32 | 64): bigint {
  if (Number.isNaN(x)) return 0n;
  const min = bits === 32 ? -(2n ** 31n) : I64_MIN, max = bits === 32 ? 2n ** 31n - 1n : I64_MAX;
  if (x <= Number(min)) return min;
  if (x >= Number(max)) return max;
  return BigInt(Math.trunc(x));
}

/** Round a float64 to the float dtype `dtype` (round to nearest even, via float32 for halves). */
export function roundFloat(x: number, dtype: DType): number {
  const f = Math.fround(x);
  if (dtype === "float16") return f16ToF32(f32ToF16(f));
  if (dtype === "bfloat16") return bf16ToF32(f32ToBf16(f));
  return f;
}

/** The cpu device's copy semantics: value `x` of dtype `from` converted to `to`. */
export function cast(x: Value, from: DType, to: DType): Value {
  const isInt = from === "int32" || from === "int64" || from === "bool";
  if (to === "bool") return (typeof x === "bigint" ? x !== 0n : x !== 0) ? 1 : 0;
  if (isInt) {
    const i = BigInt(x);
    if (to === "int64") return i;
    if (to === "int32") return Number(BigInt.asIntN(32, i));
    return roundFloat(bigintToF32(i), to);
  }
  const f = Math.fround(x as number);
  if (to === "int64") return floatToInt(f, 64);
  if (to === "int32") return Number(floatToInt(f, 32));
  return roundFloat(f, to);
}

/** Convert a whole host tensor (the reference of `.to(dtype)`). */
export function castTensor(t: HostTensor, to: DType): HostTensor {
  return host(to, t.shape, t.values.map((v) => cast(v, t.dtype, to)));
}

/** A value as float64 (int64 converted exactly where it fits). */
export function num(v: Value): number {
  return typeof v === "bigint" ? Number(v) : v;
}

// ------------------------------------------------------------------ float math

/** erf to float64 accuracy (series for |x| < 2.5, continued fraction for erfc beyond). */
export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x);
  let r: number;
  if (a < 2.5) {
    let sum = 0, term = a;
    for (let n = 0; n < 200; n++) {
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
      term *= (-a * a) / (n + 1);
    }
    r = (2 / Math.sqrt(Math.PI)) * sum;
  } else if (a > 6) {
    r = 1;
  } else {
    let f = 0;
    for (let k = 60; k >= 1; k--) f = k / 2 / (a + f);
    r = 1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / (a + f);
  }
  return x < 0 ? -r : r;
}

/** C's pow (pow(x, 0) = 1 and pow(1, y) = 1 even for NaN; pow(-1, ±inf) = 1). */
export function cpow(x: number, y: number): number {
  if (y === 0 || x === 1) return 1;
  if (x === -1 && !Number.isFinite(y) && !Number.isNaN(y)) return 1;
  return Math.pow(x, y);
}

export const UNARY_REF: Record<string, (x: number) => number> = {
  neg: (x) => -x,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  tanh: Math.tanh,
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  silu: (x) => x / (1 + Math.exp(-x)),
  gelu: (x) => 0.5 * x * (1 + erf(x / Math.SQRT2)),
  geluTanh: (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x))),
  abs: Math.abs,
  sin: Math.sin,
  cos: Math.cos,
  relu: (x) => (x < 0 ? 0 : x),
  softplus: (x) => (x > 20 ? x : Math.log1p(Math.exp(x))),
  reciprocal: (x) => 1 / x,
  square: (x) => x * x,
  erf,
};

// ------------------------------------------------------------------ comparison

/** Tolerance: |got - want| <= atol + rtol * magnitude (default magnitude |want|); 0/0 = exact. */
export interface Tolerance {
  rtol: number;
  atol: number;
}

export const EXACT: Tolerance = { rtol: 0, atol: 0 };

/** Half an ulp of the float dtype's mantissa, relative (rounding an exact result to it). */
export function dtypeEps(dtype: DType): number {
  return dtype === "float16" ? 2 ** -11 : dtype === "bfloat16" ? 2 ** -8 : dtype === "float32" ? 2 ** -24 : 0;
}

/**
 * How far `got` is from `want` in units of the allowed error (<= 1 passes). NaN must match NaN,
 * infinities must match exactly, integers and exact tolerances must be equal (-0 equals 0).
 */
export function errorRatio(got: Value, want: Value, tol: Tolerance, mag: number): number {
  if (typeof want === "bigint" || typeof got === "bigint") return BigInt(got) === BigInt(want) ? 0 : Infinity;
  if (Number.isNaN(want) || Number.isNaN(got)) return Number.isNaN(want) && Number.isNaN(got) ? 0 : Infinity;
  if (!Number.isFinite(want) || !Number.isFinite(got)) return want === got ? 0 : Infinity;
  const diff = Math.abs(got - want);
  if (diff === 0) return 0;
  const allowed = tol.atol + tol.rtol * mag;
  return allowed === 0 ? Infinity : diff / allowed;
}
