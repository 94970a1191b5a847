/**
 * Host-side conversions between JS values and raw bytes of each dtype (for creating tensors from
 * JS arrays and reading them back; never on a hot path).
 */
import type { DType } from "./dtype.js";
import { itemsize } from "./dtype.js";

/** The typed array `data()` returns for a dtype: float16/bfloat16 are widened to Float32Array. */
export type HostArray = Float32Array | Int32Array | BigInt64Array | Uint8Array;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 -> bfloat16 bits, round to nearest even (NaN stays NaN). */
export function f32ToBf16(x: number): number {
  f32[0] = x;
  const b = u32[0];
  if ((b & 0x7fffffff) > 0x7f800000) return (b >>> 16) | 0x40;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16ToF32(h: number): number {
  u32[0] = h << 16;
  return f32[0];
}

/** float32 -> IEEE half bits, round to nearest even, with subnormals, inf and NaN. */
export function f32ToF16(x: number): number {
  f32[0] = x;
  const b = u32[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
  return sign | h;
}

export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Encode JS numbers (or bigints / booleans) as raw little-endian bytes of `dtype`. */
export function encode(values: ArrayLike<number | bigint | boolean>, dtype: DType): Uint8Array {
  const n = values.length;
  const bytes = new Uint8Array(n * itemsize(dtype));
  const buf = bytes.buffer;
  switch (dtype) {
    case "float32": { const a = new Float32Array(buf); for (let i = 0; i < n; i++) a[i] = Number(values[i]); break; }
    case "int32": { const a = new Int32Array(buf); for (let i = 0; i < n; i++) a[i] = Number(values[i]); break; }
    case "int64": { const a = new BigInt64Array(buf); for (let i = 0; i < n; i++) { const v = values[i]; a[i] = typeof v === "bigint" ? v : BigInt(typeof v === "boolean" ? Number(v) : Math.trunc(v)); } break; }
    case "bool": { for (let i = 0; i < n; i++) bytes[i] = values[i] ? 1 : 0; break; }
    case "bfloat16": { const a = new Uint16Array(buf); for (let i = 0; i < n; i++) a[i] = f32ToBf16(Number(values[i])); break; }
    case "float16": { const a = new Uint16Array(buf); for (let i = 0; i < n; i++) a[i] = f32ToF16(Number(values[i])); break; }
  }
  return bytes;
}

/** Decode raw bytes of `dtype` (a fresh, aligned copy is made when needed). */
export function decode(bytes: Uint8Array, dtype: DType): HostArray {
  const aligned = bytes.byteOffset % 8 === 0 ? bytes : bytes.slice();
  const n = aligned.byteLength / itemsize(dtype);
  switch (dtype) {
    case "float32": return new Float32Array(aligned.buffer, aligned.byteOffset, n);
    case "int32": return new Int32Array(aligned.buffer, aligned.byteOffset, n);
    case "int64": return new BigInt64Array(aligned.buffer, aligned.byteOffset, n);
    case "bool": return aligned;
    case "bfloat16":
    case "float16": {
      const h = new Uint16Array(aligned.buffer, aligned.byteOffset, n);
      const out = new Float32Array(n);
      const conv = dtype === "bfloat16" ? bf16ToF32 : f16ToF32;
      for (let i = 0; i < n; i++) out[i] = conv(h[i]);
      return out;
    }
  }
}
