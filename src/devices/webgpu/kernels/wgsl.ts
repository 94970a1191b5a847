/**
 * The WGSL library every webgpu kernel includes, and generators for typed loads and stores.
 *
 * Buffers are bound as array<u32>: float32/int32 are one word, int64 two (lo, hi), float16 and
 * bfloat16 two per word, bool four per word. Inside a kernel each dtype computes in a value class
 * (`Cls`): f32 for the float dtypes, i32, vec2<u32> for int64 (two's complement, emulated), and
 * u32 0/1 for bool. Conversions follow the cpu device exactly (native.ts): float -> int truncates
 * and saturates (NaN -> 0), int64 -> float32 rounds to nearest even, float32 -> float16/bfloat16
 * rounds to nearest even.
 *
 * Math is written out rather than taken from WGSL builtins where builtins are not accurate on every
 * implementation (Mesa's llvmpipe: exp/log ~1e-5 relative, tanh worse, log of denormals wrong) or
 * where WGSL leaves NaN/inf behaviour undefined: exp, log, sin, cos, tanh, erf are Cephes-style
 * (about 1 ulp) and NaN tests use the bits (`x != x` may be folded to false).
 */
import type { DType } from "../../dtype.js";

/** The value class a dtype computes in (see the file comment). */
export type Cls = "f" | "i" | "l" | "b";

export const CLS: Record<DType, Cls> = { float32: "f", float16: "f", bfloat16: "f", int32: "i", int64: "l", bool: "b" };
export const WGSL_TYPE: Record<Cls, string> = { f: "f32", i: "i32", l: "vec2<u32>", b: "u32" };

/** Parameters (binding 0), the flat workgroup id, and special float values. */
const PRELUDE = /* wgsl */ `
struct Params { v: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
fn pu(i: u32) -> u32 { return P.v[i >> 2u][i & 3u]; }
fn pi(i: u32) -> i32 { return bitcast<i32>(pu(i)); }
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }
fn group_id(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.y * nwg.x + wid.x; }

// Through a \`let\`: WGSL rejects NaN and infinity in constant expressions.
fn nan_f() -> f32 { let b = 0x7fc00000u; return bitcast<f32>(b); }
fn inf_f() -> f32 { let b = 0x7f800000u; return bitcast<f32>(b); }
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn is_finite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) < 0x7f800000u; }
fn is_neg_inf(x: f32) -> bool { return bitcast<u32>(x) == 0xff800000u; }
`;

const MATH = /* wgsl */ `
// 2^n for n in [-126, 127], exactly.
fn pow2i(n: i32) -> f32 { return bitcast<f32>(u32(n + 127) << 23u); }

fn exp_f(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x > 88.72283935546875) { return inf_f(); }
  if (x < -103.97208404541016) { return 0.0; }
  let n = floor(x * 1.44269504088896341 + 0.5);
  let r = (x - n * 0.693359375) - n * -2.12194440e-4;
  let z = r * r;
  let p = ((((1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r + 4.1665795894e-2) * r + 1.6666665459e-1) * r + 5.0000001201e-1;
  let y = p * z + r + 1.0;
  let k = i32(n);
  if (k < -126) { return y * pow2i(k + 64) * pow2i(-64); }
  if (k > 127) { return y * pow2i(k - 1) * 2.0; }
  return y * pow2i(k);
}

fn log_f(x: f32) -> f32 {
  let b = bitcast<u32>(x);
  if (is_nan(x) || (b > 0x80000000u)) { return nan_f(); }
  if ((b & 0x7fffffffu) == 0u) { return -inf_f(); }
  if (b == 0x7f800000u) { return x; }
  // x = m * 2^e with m in [0.5, 1), denormals included.
  var m: f32;
  var e: i32;
  if (b < 0x00800000u) {
    let sh = countLeadingZeros(b) - 8u;
    m = bitcast<f32>(((b << sh) & 0x7fffffu) | 0x3f000000u);
    e = -125 - i32(sh);
  } else {
    m = bitcast<f32>((b & 0x7fffffu) | 0x3f000000u);
    e = i32(b >> 23u) - 126;
  }
  var t: f32;
  if (m < 0.707106781186547524) { e = e - 1; t = m + m - 1.0; } else { t = m - 1.0; }
  let fe = f32(e);
  let z = t * t;
  var y = 7.0376836292e-2 * t - 1.1514610310e-1;
  y = y * t + 1.1676998740e-1;
  y = y * t - 1.2420140846e-1;
  y = y * t + 1.4249322787e-1;
  y = y * t - 1.6668057665e-1;
  y = y * t + 2.0000714765e-1;
  y = y * t - 2.4999993993e-1;
  y = y * t + 3.3333331174e-1;
  y = y * t * z;
  y = y + fe * -2.12194440e-4;
  y = y - 0.5 * z;
  return (t + y) + fe * 0.693359375;
}

// log(1 + u), accurate for small u: 2 atanh(u / (2 + u)) by its series. (Goldberg's
// log(w) * u / (w - 1) does not survive: compilers fold (1 + u) - 1 to u.)
fn log1p_f(u: f32) -> f32 {
  if (abs(u) >= 0.5 || is_nan(u)) { return log_f(1.0 + u); }
  let s = u / (2.0 + u);
  let s2 = s * s;
  let p = ((((((s2 / 13.0 + 1.0 / 11.0) * s2 + 1.0 / 9.0) * s2 + 1.0 / 7.0) * s2 + 0.2) * s2 + 1.0 / 3.0) * s2) * s;
  return 2.0 * (s + p);
}

// sin (want_cos = false) or cos, Cephes sinf/cosf: reduction by pi/4 in three parts.
fn sincos_f(x: f32, want_cos: bool) -> f32 {
  if (!is_finite(x)) { return nan_f(); }
  let a = abs(x);
  var sgn = select(1.0, -1.0, !want_cos && x < 0.0);
  var j = u32(a * 1.27323954473516);
  var y = f32(j);
  if ((j & 1u) == 1u) { j = j + 1u; y = y + 1.0; }
  j = j & 7u;
  if (j > 3u) { sgn = -sgn; j = j - 4u; }
  if (want_cos && j > 1u) { sgn = -sgn; }
  let r = ((a - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;
  let z = r * r;
  var v: f32;
  if ((j == 1u || j == 2u) != want_cos) {
    v = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;
  } else {
    v = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
  }
  return sgn * v;
}

fn tanh_f(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let a = abs(x);
  if (a > 44.36) { return select(1.0, -1.0, x < 0.0); }
  if (a < 0.625) {
    let s = x * x;
    let p = (((-5.70498872745e-3 * s + 2.06390887954e-2) * s - 5.37397155531e-2) * s + 1.33314422036e-1) * s - 3.33332819422e-1;
    return p * s * x + x;
  }
  let r = 1.0 - 2.0 / (exp_f(2.0 * a) + 1.0);
  return select(r, -r, x < 0.0);
}

// erf with about 1 ulp error (N. Juffa's minimax polynomials).
fn erf_f(x: f32) -> f32 {
  let t = abs(x);
  if (t >= 4.0) { return select(1.0, -1.0, x < 0.0); }
  let s = x * x;
  if (t > 0.927734375) {
    var r = fma(-1.72853470e-5, t, 3.83197126e-4);
    let u = fma(-3.88396438e-3, t, 2.42546219e-2);
    r = fma(r, s, u);
    r = fma(r, t, -1.06777877e-1);
    r = fma(r, t, -6.34846687e-1);
    r = fma(r, t, -1.28717512e-1);
    r = fma(r, t, -t);
    r = 1.0 - exp_f(r);
    return select(r, -r, x < 0.0);
  }
  var r = -5.96761703e-4;
  r = fma(r, s, 4.99119423e-3);
  r = fma(r, s, -2.67681349e-2);
  r = fma(r, s, 1.12819925e-1);
  r = fma(r, s, -3.76125336e-1);
  r = fma(r, s, 1.28379166e-1);
  return fma(r, x, x);
}

fn is_int_f(y: f32) -> bool { return floor(y) == y; }
fn is_odd_int_f(y: f32) -> bool { return abs(y) < 16777216.0 && is_int_f(y) && (i32(y) & 1) != 0; }

// pow with C's special cases (pow(x, 0) = 1 and pow(1, y) = 1 even for NaN; negative bases need
// integer exponents).
fn pow_f(x: f32, y: f32) -> f32 {
  if (y == 0.0 || x == 1.0) { return 1.0; }
  if (is_nan(x) || is_nan(y)) { return nan_f(); }
  let ax = abs(x);
  if (is_inf(y)) {
    if (ax == 1.0) { return 1.0; }
    return select(0.0, inf_f(), (ax > 1.0) == (y > 0.0));
  }
  let odd = is_odd_int_f(y);
  let neg = x < 0.0 || (x == 0.0 && (bitcast<u32>(x) >> 31u) == 1u);
  let flip = neg && odd;
  var r: f32;
  if (x == 0.0 || is_inf(x)) {
    r = select(0.0, inf_f(), (y < 0.0) == (x == 0.0));
  } else {
    if (x < 0.0 && !is_int_f(y)) { return nan_f(); }
    r = exp_f(y * log_f(ax));
  }
  return select(r, -r, flip);
}

fn gelu_f(x: f32) -> f32 { return 0.5 * x * (1.0 + erf_f(x * 0.70710678118654752)); }
fn gelu_tanh_f(x: f32) -> f32 { return 0.5 * x * (1.0 + tanh_f(0.79788456080286536 * (x + 0.044715 * x * x * x))); }
fn max_f(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return a + b; } return select(b, a, a > b); }
fn min_f(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return a + b; } return select(b, a, a < b); }
`;

/** int64 as vec2<u32>(lo, hi), two's complement with wrapping arithmetic. */
const INT64 = /* wgsl */ `
fn l_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { let lo = a.x + b.x; return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x)); }
fn l_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x)); }
fn l_neg(a: vec2<u32>) -> vec2<u32> { return l_sub(vec2<u32>(0u), a); }
fn l_is_neg(a: vec2<u32>) -> bool { return (a.y >> 31u) == 1u; }
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
fn l_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { let w = mul_wide(a.x, b.x); return vec2<u32>(w.x, w.y + a.x * b.y + a.y * b.x); }
fn l_eq(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x == b.x && a.y == b.y; }
fn l_lt(a: vec2<u32>, b: vec2<u32>) -> bool { if (a.y != b.y) { return bitcast<i32>(a.y) < bitcast<i32>(b.y); } return a.x < b.x; }
fn l_ult(a: vec2<u32>, b: vec2<u32>) -> bool { if (a.y != b.y) { return a.y < b.y; } return a.x < b.x; }
fn l_max(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(b, a, l_lt(b, a)); }
fn l_min(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(b, a, l_lt(a, b)); }
fn l_from_i32(v: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0)); }
fn l_shl(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) { return a; }
  if (s >= 32u) { return vec2<u32>(0u, a.x << (s - 32u)); }
  return vec2<u32>(a.x << s, (a.y << s) | (a.x >> (32u - s)));
}
fn l_udiv(n: vec2<u32>, d: vec2<u32>) -> vec2<u32> {
  var q = vec2<u32>(0u);
  var r = vec2<u32>(0u);
  for (var i = 63; i >= 0; i--) {
    let bit = select((n.x >> u32(i)) & 1u, (n.y >> u32(i - 32)) & 1u, i >= 32);
    r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
    if (!l_ult(r, d)) {
      r = l_sub(r, d);
      if (i >= 32) { q.y = q.y | (1u << u32(i - 32)); } else { q.x = q.x | (1u << u32(i)); }
    }
  }
  return q;
}
// Division truncating toward zero; x / 0 = 0.
fn l_div(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  if (b.x == 0u && b.y == 0u) { return vec2<u32>(0u); }
  let q = l_udiv(select(a, l_neg(a), l_is_neg(a)), select(b, l_neg(b), l_is_neg(b)));
  return select(q, l_neg(q), l_is_neg(a) != l_is_neg(b));
}
fn i_div(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  if (b == -1) { return 0 - a; }
  return a / b;
}
`;

const CONVERT = /* wgsl */ `
// u32 -> f32, round to nearest even.
fn u32_to_f32(x: u32) -> f32 {
  if (x < 0x1000000u) { return f32(x); }
  let p = 31u - countLeadingZeros(x);
  let s = p - 23u;
  var m = x >> s;
  let rem = x & ((1u << s) - 1u);
  let half = 1u << (s - 1u);
  if (rem > half || (rem == half && (m & 1u) == 1u)) { m = m + 1u; }
  return bitcast<f32>(((p + 127u) << 23u) + (m - 0x800000u));
}
fn i32_to_f32(v: i32) -> f32 {
  let r = u32_to_f32(select(bitcast<u32>(v), 0u - bitcast<u32>(v), v < 0));
  return select(r, -r, v < 0);
}
fn l_to_f32(v: vec2<u32>) -> f32 {
  let neg = l_is_neg(v);
  let a = select(v, l_neg(v), neg);
  var r: f32;
  if (a.y == 0u) {
    r = u32_to_f32(a.x);
  } else {
    // Keep the top 32 bits and fold the rest into a sticky bit, then scale by 2^sh.
    let sh = 32u - countLeadingZeros(a.y);
    var top: u32;
    var sticky: bool;
    if (sh == 32u) { top = a.y; sticky = a.x != 0u; } else {
      top = (a.y << (32u - sh)) | (a.x >> sh);
      sticky = (a.x & ((1u << sh) - 1u)) != 0u;
    }
    r = u32_to_f32(top | select(0u, 1u, sticky)) * bitcast<f32>((127u + sh) << 23u);
  }
  return select(r, -r, neg);
}
fn f32_to_i32(f: f32) -> i32 {
  if (is_nan(f)) { return 0; }
  if (f <= -2147483648.0) { return bitcast<i32>(0x80000000u); }
  if (f >= 2147483648.0) { return 2147483647; }
  return i32(f);
}
fn f32_to_l(f: f32) -> vec2<u32> {
  if (is_nan(f)) { return vec2<u32>(0u); }
  if (f <= -9223372036854775808.0) { return vec2<u32>(0u, 0x80000000u); }
  if (f >= 9223372036854775808.0) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }
  let a = abs(f);
  if (a < 1.0) { return vec2<u32>(0u); }
  let b = bitcast<u32>(a);
  let e = (b >> 23u) - 127u;
  let m = (b & 0x7fffffu) | 0x800000u;
  var r: vec2<u32>;
  if (e <= 23u) { r = vec2<u32>(m >> (23u - e), 0u); } else { r = l_shl(vec2<u32>(m, 0u), e - 23u); }
  return select(r, l_neg(r), f < 0.0);
}
fn f16_to_f32(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0x1fu) { return bitcast<f32>(sign | 0x7f800000u | (m << 13u)); }
  if (e != 0u) { return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u)); }
  if (m == 0u) { return bitcast<f32>(sign); }
  let s = countLeadingZeros(m) - 21u;
  return bitcast<f32>(sign | ((113u - s) << 23u) | (((m << s) & 0x3ffu) << 13u));
}
fn f32_to_f16(f: f32) -> u32 {
  var u = bitcast<u32>(f);
  let sign = (u >> 16u) & 0x8000u;
  u = u & 0x7fffffffu;
  if (u >= 0x7f800000u) { return sign | select(0x7c00u, 0x7e00u, u > 0x7f800000u); }
  if (u >= 0x477ff000u) { return sign | 0x7c00u; }
  if (u < 0x38800000u) {
    let e = u >> 23u;
    if (e < 102u) { return sign; }
    let mant = (u & 0x7fffffu) | 0x800000u;
    let s = 126u - e;
    var h = mant >> s;
    let rem = mant & ((1u << s) - 1u);
    let half = 1u << (s - 1u);
    if (rem > half || (rem == half && (h & 1u) == 1u)) { h = h + 1u; }
    return sign | h;
  }
  return sign | (((u + 0xc8000fffu + ((u >> 13u) & 1u)) >> 13u) & 0xffffu);
}
fn f32_to_bf16(f: f32) -> u32 {
  let u = bitcast<u32>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return (u >> 16u) | 0x40u; }
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
`;

/** The library, included at the top of every kernel. */
export const LIBRARY = PRELUDE + MATH + INT64 + CONVERT;

/**
 * WGSL: `fn row_sum(v: f32, lid: u32) -> f32`, the sum of v over a workgroup of `size` threads (a
 * power of two), the same (uniform) value returned to every thread, through the workgroup array
 * `mem` (the norms' reduction; reduction_check.ts runs it on every adapter before use).
 */
export function workgroupSum(size: number, mem = "S"): string {
  return /* wgsl */ `
var<workgroup> ${mem}: array<f32, ${size}>;
fn row_sum(v: f32, lid: u32) -> f32 {
  ${mem}[lid] = v;
  workgroupBarrier();
  for (var s = ${size / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s) { ${mem}[lid] = ${mem}[lid] + ${mem}[lid + s]; }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&${mem}[0]);
  workgroupBarrier();
  return r;
}
`;
}

/** The standard entry point header of a kernel with `size` threads per workgroup. */
export function entry(size: number): string {
  return `@compute @workgroup_size(${size}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32)`;
}

/** WGSL converting `e` from value class `from` to `to` (the cpu device's copy semantics). */
export function cvt(from: Cls, to: Cls, e: string): string {
  if (from === to) return e;
  const table: Record<string, string> = {
    fi: `f32_to_i32(${e})`, fl: `f32_to_l(${e})`, fb: `select(0u, 1u, (bitcast<u32>(${e}) & 0x7fffffffu) != 0u)`,
    if: `i32_to_f32(${e})`, il: `l_from_i32(${e})`, ib: `select(0u, 1u, ${e} != 0)`,
    lf: `l_to_f32(${e})`, li: `bitcast<i32>((${e}).x)`, lb: `select(0u, 1u, any((${e}) != vec2<u32>(0u)))`,
    bf: `f32(${e})`, bi: `i32(${e})`, bl: `vec2<u32>(${e}, 0u)`,
  };
  return table[from + to];
}

/** Declaration of storage binding `n` named `name`: read-only, read-write, or atomic words. */
export function binding(n: number, name: string, access: "read" | "write" | "atomic"): string {
  const type = access === "atomic" ? "array<atomic<u32>>" : "array<u32>";
  return `@group(0) @binding(${n}) var<storage, ${access === "read" ? "read" : "read_write"}> ${name}: ${type};\n`;
}

/** `fn ld_<name>(i: u32) -> <class type>`: element i of binding `name` holding `dtype`. */
export function loader(name: string, dtype: DType): string {
  const body: Record<DType, string> = {
    float32: `return bitcast<f32>(${name}[i]);`,
    int32: `return bitcast<i32>(${name}[i]);`,
    int64: `return vec2<u32>(${name}[2u * i], ${name}[2u * i + 1u]);`,
    float16: `return f16_to_f32((${name}[i >> 1u] >> ((i & 1u) << 4u)) & 0xffffu);`,
    bfloat16: `return bitcast<f32>(((${name}[i >> 1u] >> ((i & 1u) << 4u)) & 0xffffu) << 16u);`,
    bool: `return select(0u, 1u, ((${name}[i >> 2u] >> ((i & 3u) << 3u)) & 0xffu) != 0u);`,
  };
  return `fn ld_${name}(i: u32) -> ${WGSL_TYPE[CLS[dtype]]} { ${body[dtype]} }\n`;
}

/** WGSL giving the raw bits (right-aligned) of value `e` of class CLS[dtype] stored as `dtype`. */
function bitsOf(dtype: DType, e: string): string {
  switch (dtype) {
    case "float32": return `bitcast<u32>(${e})`;
    case "int32": return `bitcast<u32>(${e})`;
    case "float16": return `f32_to_f16(${e})`;
    case "bfloat16": return `f32_to_bf16(${e})`;
    case "bool": return `(${e})`;
    case "int64": throw new Error("bitsOf: int64 is two words");
  }
}

/**
 * `fn st_<name>(i: u32, v: <class type>)`: write element i of binding `name` holding `dtype`.
 * Dtypes narrower than a word need the binding declared "atomic" (neighbours may be written by
 * other threads).
 */
export function storer(name: string, dtype: DType): string {
  const t = WGSL_TYPE[CLS[dtype]];
  if (dtype === "int64") return `fn st_${name}(i: u32, v: ${t}) { ${name}[2u * i] = v.x; ${name}[2u * i + 1u] = v.y; }\n`;
  if (dtype === "float32" || dtype === "int32") return `fn st_${name}(i: u32, v: ${t}) { ${name}[i] = ${bitsOf(dtype, "v")}; }\n`;
  const [per, width, mask] = dtype === "bool" ? [2, 3, "0xffu"] : [1, 4, "0xffffu"];
  return `fn st_${name}(i: u32, v: ${t}) {
  let w = i >> ${per}u;
  let sh = (i & ${(1 << per) - 1}u) << ${width}u;
  atomicAnd(&${name}[w], ~(${mask} << sh));
  atomicOr(&${name}[w], ${bitsOf(dtype, "v")} << sh);
}\n`;
}

/** True when `dtype` is narrower than a 32-bit word. */
export function subWord(dtype: DType): boolean {
  return dtype === "float16" || dtype === "bfloat16" || dtype === "bool";
}
