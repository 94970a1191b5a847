/**
 * Row kernels over the last axis of a contiguous [rows, n] tensor, one workgroup per row:
 * reduce (sum, mean, max, min, argmax, argmin, prod), cumsum, softmax / log-softmax.
 *
 * Semantics follow the cpu addon: float sums are compensated (Neumaier) so they stay within an
 * ulp or two of its double accumulation; float products keep a separate exponent so they only
 * overflow when the result does; max/min/argmax/argmin return the first NaN if any, else the first
 * extremum; integer sums and products wrap in int64.
 */
import type { KernelSignatures, ReduceOp } from "../../kernels.js";
import { numel, type TensorView } from "../../view.js";
import { grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { binding, CLS, entry, LIBRARY, loader, storer, WGSL_TYPE, type Cls } from "./wgsl.js";

const WG = 64;

/** Neumaier-compensated float sums: vec2(sum, compensation). */
const KAHAN = /* wgsl */ `
fn kadd(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let t = a.x + b.x;
  let e = select((b.x - t) + a.x, (a.x - t) + b.x, abs(a.x) >= abs(b.x));
  return vec2<f32>(t, a.y + b.y + e);
}
fn kval(a: vec2<f32>) -> f32 { return select(a.x + a.y, a.x, !is_finite(a.x)); }
`;

/** Float products as mantissa * 2^exponent: Prod(m in [0.5, 1), e, flags: 1 NaN, 2 zero, 4 inf, 8 negative). */
const PROD = /* wgsl */ `
struct Prod { m: f32, e: i32, f: u32 }
fn prod_norm(m: f32, e: i32, f: u32) -> Prod {
  if (m < 0.5) { return Prod(m * 2.0, e - 1, f); }
  return Prod(m, e, f);
}
fn prod_lift(x: f32) -> Prod {
  let b = bitcast<u32>(x);
  let sign = select(0u, 8u, (b >> 31u) == 1u);
  if (is_nan(x)) { return Prod(1.0, 0, 1u); }
  if (is_inf(x)) { return Prod(1.0, 0, 4u | sign); }
  if ((b & 0x7fffffffu) == 0u) { return Prod(1.0, 0, 2u | sign); }
  var a = abs(x);
  var e = 0;
  if (a < 1.17549435e-38) { a = a * 18446744073709551616.0; e = -64; }
  let ab = bitcast<u32>(a);
  return Prod(bitcast<f32>((ab & 0x7fffffu) | 0x3f000000u), e + i32(ab >> 23u) - 126, sign);
}
fn prod_mul(a: Prod, b: Prod) -> Prod {
  return prod_norm(a.m * b.m, a.e + b.e, ((a.f | b.f) & 7u) | ((a.f ^ b.f) & 8u));
}
fn prod_val(a: Prod) -> f32 {
  let sign = select(1.0, -1.0, (a.f & 8u) != 0u);
  if ((a.f & 1u) != 0u || (a.f & 6u) == 6u) { return nan_f(); }
  if ((a.f & 4u) != 0u) { return sign * inf_f(); }
  if ((a.f & 2u) != 0u) { return sign * 0.0; }
  let e = clamp(a.e, -400, 400);
  var r = a.m;
  if (e > 0) { r = r * pow2i(min(e, 127)) * pow2i(clamp(e - 127, 0, 127)) * pow2i(clamp(e - 254, 0, 127)); }
  else { r = r * pow2i(max(e, -126)) * pow2i(clamp(e + 126, -126, 0)) * pow2i(clamp(e + 252, -126, 0)); }
  return sign * r;
}
`;

interface Combine {
  /** Accumulator type. */
  acc: string;
  /** Extra WGSL the functions need. */
  lib?: string;
  /** The accumulator of no elements. */
  identity: string;
  /** fn lift(x: <input class>, j: u32) -> acc. */
  lift: string;
  /** fn merge(a: acc, b: acc) -> acc. */
  merge: string;
  /** fn fin(a: acc, n: u32) -> <output class>. */
  fin: string;
}

const NONE = "0xffffffffu";

/** Index reductions: the first NaN, else the first extremum (ties and NaNs by lower index). */
function argCombine(c: Cls, max: boolean): Combine {
  const t = WGSL_TYPE[c];
  const gt = max ? (a: string, b: string) => greater(c, a, b) : (a: string, b: string) => greater(c, b, a);
  const nan = (v: string) => (c === "f" ? `is_nan(${v})` : "false");
  return {
    acc: "Arg",
    lib: `struct Arg { v: ${t}, i: u32 }
fn better(a: Arg, b: Arg) -> bool {
  if (b.i == ${NONE}) { return false; }
  if (a.i == ${NONE}) { return true; }
  let an = ${nan("a.v")}; let bn = ${nan("b.v")};
  if (an || bn) { return bn && (!an || b.i < a.i); }
  return ${gt("b.v", "a.v")} || (!(${gt("a.v", "b.v")}) && b.i < a.i);
}\n`,
    identity: `Arg(${t}(), ${NONE})`,
    lift: `return Arg(x, j);`,
    merge: "if (better(a, b)) { return b; } return a;",
    fin: `return vec2<u32>(a.i, 0u);`,
  };
}

function greater(c: Cls, a: string, b: string): string {
  return c === "l" ? `l_lt(${b}, ${a})` : `${a} > ${b}`;
}

function combine(op: ReduceOp, c: Cls): Combine {
  if (op === "argmax" || op === "argmin") return argCombine(c, op === "argmax");
  if (c === "f") {
    switch (op) {
      case "sum":
      case "mean":
        return {
          acc: "vec2<f32>", lib: KAHAN, identity: "vec2<f32>(0.0)", lift: "return vec2<f32>(x, 0.0);", merge: "return kadd(a, b);",
          fin: op === "sum" ? "return kval(a);" : "return kval(a) / f32(n);",
        };
      case "prod":
        return { acc: "Prod", lib: PROD, identity: "Prod(1.0, 0, 0u)", lift: "return prod_lift(x);", merge: "return prod_mul(a, b);", fin: "return prod_val(a);" };
      default: {
        const better = op === "max" ? "b > a" : "b < a";
        return {
          acc: "f32", identity: op === "max" ? "-inf_f()" : "inf_f()", lift: "return x;",
          merge: `if (is_nan(a)) { return a; } if (is_nan(b) || ${better}) { return b; } return a;`, fin: "return a;",
        };
      }
    }
  }
  const lift = c === "l" ? "x" : "l_from_i32(x)";
  switch (op) {
    case "sum":
      return { acc: "vec2<u32>", identity: "vec2<u32>(0u)", lift: `return ${lift};`, merge: "return l_add(a, b);", fin: "return a;" };
    case "prod":
      return { acc: "vec2<u32>", identity: "vec2<u32>(1u, 0u)", lift: `return ${lift};`, merge: "return l_mul(a, b);", fin: "return a;" };
    default: {
      const t = WGSL_TYPE[c];
      const fn = c === "l" ? `l_${op}` : op;
      const identity = c === "l"
        ? (op === "max" ? "vec2<u32>(0u, 0x80000000u)" : "vec2<u32>(0xffffffffu, 0x7fffffffu)")
        : (op === "max" ? "bitcast<i32>(0x80000000u)" : "2147483647");
      return { acc: t, identity, lift: "return x;", merge: `return ${fn}(a, b);`, fin: "return a;" };
    }
  }
}

function rowsOf(x: TensorView): number {
  return numel(x) / x.shape[x.shape.length - 1];
}

function reduce(op: ReduceOp, x: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const c = CLS[x.dtype];
  const rows = numel(out), n = x.shape[x.shape.length - 1];
  const prog = dev.dispatcher.program(`reduce:${op}:${x.dtype}>${out.dtype}`, ["read", "write"], () => {
    const k = combine(op, c);
    return `${LIBRARY}${k.lib ?? ""}
${binding(1, "x", "read")}${loader("x", x.dtype)}${binding(2, "out", "write")}${storer("out", out.dtype)}
fn lift(x: ${WGSL_TYPE[c]}, j: u32) -> ${k.acc} { ${k.lift} }
fn merge(a: ${k.acc}, b: ${k.acc}) -> ${k.acc} { ${k.merge} }
fn fin(a: ${k.acc}, n: u32) -> ${WGSL_TYPE[CLS[out.dtype]]} { ${k.fin} }
var<workgroup> S: array<${k.acc}, ${WG}>;
${entry(WG)} {
  let row = group_id(wid, nwg);
  if (row >= pu(0u)) { return; }
  let n = pu(1u);
  let base = pu(2u) + row * n;
  var acc = ${k.identity};
  for (var j = lid; j < n; j = j + ${WG}u) { acc = merge(acc, lift(ld_x(base + j), j)); }
  S[lid] = acc;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s) { S[lid] = merge(S[lid], S[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u) { st_out(pu(3u) + row, fin(S[0], n)); }
}`;
  });
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(out)], [rows, n, x.offset, out.offset], grid(rows, 1));
}

function cumsum(x: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const rows = rowsOf(x), n = x.shape[x.shape.length - 1];
  const f = x.dtype === "float32";
  const [acc, zero, add, val, lift] = f
    ? ["vec2<f32>", "vec2<f32>(0.0)", "kadd", "kval", (e: string) => `vec2<f32>(${e}, 0.0)`]
    : ["vec2<u32>", "vec2<u32>(0u)", "l_add", "", (e: string) => e];
  const prog = dev.dispatcher.program(`cumsum:${x.dtype}`, ["read", "write"], () => `${LIBRARY}${KAHAN}
${binding(1, "x", "read")}${loader("x", x.dtype)}${binding(2, "out", "write")}${storer("out", out.dtype)}
var<workgroup> S: array<${acc}, ${WG}>;
${entry(WG)} {
  let row = group_id(wid, nwg);
  if (row >= pu(0u)) { return; }
  let n = pu(1u);
  let chunk = (n + ${WG - 1}u) / ${WG}u;
  let lo = min(n, lid * chunk);
  let hi = min(n, lo + chunk);
  let xb = pu(2u) + row * n;
  let ob = pu(3u) + row * n;
  var s = ${zero};
  for (var j = lo; j < hi; j = j + 1u) { s = ${add}(s, ${lift("ld_x(xb + j)")}); }
  S[lid] = s;
  workgroupBarrier();
  if (lid == 0u) {
    var run = ${zero};
    for (var t = 0u; t < ${WG}u; t = t + 1u) { let v = S[t]; S[t] = run; run = ${add}(run, v); }
  }
  workgroupBarrier();
  s = S[lid];
  for (var j = lo; j < hi; j = j + 1u) {
    s = ${add}(s, ${lift("ld_x(xb + j)")});
    st_out(ob + j, ${val}(s));
  }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(out)], [rows, n, x.offset, out.offset], grid(rows, 1));
}

function softmax(x: TensorView, out: TensorView, log: boolean): void {
  const dev = deviceOf(out);
  const rows = rowsOf(x), n = x.shape[x.shape.length - 1];
  const prog = dev.dispatcher.program(`softmax:${log}`, ["read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
var<workgroup> S: array<f32, ${WG}>;
fn reduce_max(v: f32, lid: u32) -> f32 {
  S[lid] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s) { S[lid] = max_f(S[lid], S[lid + s]); }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&S[0]);
  workgroupBarrier();
  return r;
}
fn reduce_sum(v: f32, lid: u32) -> f32 {
  S[lid] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s) { S[lid] = S[lid] + S[lid + s]; }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&S[0]);
  workgroupBarrier();
  return r;
}
${entry(WG)} {
  let row = group_id(wid, nwg);
  if (row >= pu(0u)) { return; }
  let n = pu(1u);
  let xb = pu(2u) + row * n;
  let yb = pu(3u) + row * n;
  var m = -inf_f();
  for (var j = lid; j < n; j = j + ${WG}u) { m = max_f(m, X[xb + j]); }
  m = reduce_max(m, lid);
  if (is_neg_inf(m)) {
    for (var j = lid; j < n; j = j + ${WG}u) { Y[yb + j] = ${log ? "-inf_f()" : "0.0"}; }
    return;
  }
  var s = 0.0;
  for (var j = lid; j < n; j = j + ${WG}u) { s = s + exp_f(X[xb + j] - m); }
  s = reduce_sum(s, lid);
  ${log ? "let ls = log_f(s);" : "let inv = 1.0 / s;"}
  for (var j = lid; j < n; j = j + ${WG}u) {
    ${log ? "Y[yb + j] = (X[xb + j] - m) - ls;" : "Y[yb + j] = exp_f(X[xb + j] - m) * inv;"}
  }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(out)], [rows, n, x.offset, out.offset], grid(rows, 1));
}

export const reduceKernels: Pick<KernelSignatures, "reduce" | "cumsum" | "softmax"> = { reduce, cumsum, softmax };
