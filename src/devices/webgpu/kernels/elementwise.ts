/**
 * Elementwise webgpu kernels: copy (strided, any dtype to any dtype), unary (float32), binary
 * (broadcast strided views; float32, int32, int64, bool), where. One thread per output element;
 * outputs narrower than a word (bool, float16, bfloat16) are written with atomics, so strided
 * destinations at any element offset are safe.
 */
import type { BinaryOp, FusedStep, KernelSignatures, UnaryOp } from "../../kernels.js";
import { allocateView, numel, type TensorView } from "../../view.js";
import { grid } from "../dispatch.js";
import { bufferOf, deviceOf, stridedOffsets, stridedParams } from "./common.js";
import { binding, CLS, cvt, entry, LIBRARY, loader, storer, subWord, type Cls } from "./wgsl.js";

const WG = 256;

/**
 * Run `out[i] = expr(ld_in0(o0), …)` over out's shape: inputs and out are strided views of that
 * shape; `expr` receives WGSL for each input's value (in its dtype's value class).
 */
function strided(key: string, inputs: readonly TensorView[], out: TensorView, expr: (xs: string[]) => string): void {
  const dev = deviceOf(out);
  const names = inputs.map((_, k) => `in${k}`);
  const access = inputs.map(() => "read" as const);
  const prog = dev.dispatcher.program(`${key}:${inputs.map((t) => t.dtype).join(",")}>${out.dtype}`, [...access, "write"], () => {
    const decls = inputs.map((t, k) => binding(k + 1, names[k], "read") + loader(names[k], t.dtype)).join("");
    const outDecl = binding(inputs.length + 1, "out", subWord(out.dtype) ? "atomic" : "write") + storer("out", out.dtype);
    return `${LIBRARY}${decls}${outDecl}
${entry(WG)} {
  let i = group_id(wid, nwg) * ${WG}u + lid;
  if (i >= pu(0u)) { return; }
  ${stridedOffsets(inputs.length + 1)}
  st_out(o${inputs.length}, ${expr(names.map((n, k) => `ld_${n}(o${k})`))});
}`;
  });
  dev.dispatcher.dispatch(prog, [...inputs.map(bufferOf), bufferOf(out)], stridedParams(out.shape, [...inputs, out]), grid(numel(out), WG));
}

function copy(src: TensorView, dst: TensorView): void {
  if (src.storage.handle === dst.storage.handle) {
    // A buffer cannot be bound for reading and writing in one dispatch: go through a temporary.
    const tmp = allocateView(dst.storage.device, src.dtype, src.shape);
    copy(src, tmp);
    src = tmp;
  }
  strided("copy", [src], dst, ([x]) => cvt(CLS[src.dtype], CLS[dst.dtype], x));
}

const UNARY: Record<UnaryOp, (x: string) => string> = {
  neg: (x) => `bitcast<f32>(bitcast<u32>(${x}) ^ 0x80000000u)`,
  exp: (x) => `exp_f(${x})`,
  log: (x) => `log_f(${x})`,
  sqrt: (x) => `sqrt(${x})`,
  rsqrt: (x) => `1.0 / sqrt(${x})`,
  tanh: (x) => `tanh_f(${x})`,
  sigmoid: (x) => `1.0 / (1.0 + exp_f(-${x}))`,
  silu: (x) => `${x} / (1.0 + exp_f(-${x}))`,
  gelu: (x) => `gelu_f(${x})`,
  gelu_tanh: (x) => `gelu_tanh_f(${x})`,
  abs: (x) => `bitcast<f32>(bitcast<u32>(${x}) & 0x7fffffffu)`,
  sin: (x) => `sincos_f(${x}, false)`,
  cos: (x) => `sincos_f(${x}, true)`,
  // x < 0 from the bits: a compare-and-select may be compiled to max(x, 0), which drops NaN.
  relu: (x) => `select(${x}, 0.0, bitcast<u32>(${x}) > 0x80000000u && bitcast<u32>(${x}) <= 0xff800000u)`,
  softplus: (x) => `select(log1p_f(exp_f(${x})), ${x}, ${x} > 20.0)`,
  reciprocal: (x) => `1.0 / ${x}`,
  square: (x) => `${x} * ${x}`,
  erf: (x) => `erf_f(${x})`,
};

function unary(op: UnaryOp, x: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const prog = dev.dispatcher.program(`unary:${op}`, ["read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
${entry(WG)} {
  let i = group_id(wid, nwg) * ${WG}u + lid;
  if (i >= pu(0u)) { return; }
  let x = X[pu(1u) + i];
  Y[i] = ${UNARY[op]("x")};
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(out)], [numel(x), x.offset], grid(numel(x), WG));
}

const COMPARE: Partial<Record<BinaryOp, string>> = { eq: "==", ne: "!=", lt: "<", le: "<=", gt: ">", ge: ">=" };

/** WGSL for `a op b` in value class `c`; comparisons and logical ops give bool (u32 0/1). */
function binaryExpr(op: BinaryOp, c: Cls, a: string, b: string): string {
  const cmp = COMPARE[op];
  const bool = (e: string) => `select(0u, 1u, ${e})`;
  if (op === "logical_and") return `(${a} & ${b})`;
  if (op === "logical_or") return `(${a} | ${b})`;
  if (c === "l") {
    const l: Record<string, string> = {
      add: `l_add(${a}, ${b})`, sub: `l_sub(${a}, ${b})`, mul: `l_mul(${a}, ${b})`, div: `l_div(${a}, ${b})`,
      maximum: `l_max(${a}, ${b})`, minimum: `l_min(${a}, ${b})`,
      eq: bool(`l_eq(${a}, ${b})`), ne: bool(`!l_eq(${a}, ${b})`), lt: bool(`l_lt(${a}, ${b})`),
      le: bool(`!l_lt(${b}, ${a})`), gt: bool(`l_lt(${b}, ${a})`), ge: bool(`!l_lt(${a}, ${b})`),
    };
    return l[op];
  }
  if (c === "f") {
    if (cmp) {
      const nan = `is_nan(${a}) || is_nan(${b})`;
      return op === "ne" ? bool(`${nan} || ${a} != ${b}`) : bool(`!(${nan}) && ${a} ${cmp} ${b}`);
    }
    const f: Record<string, string> = {
      add: `${a} + ${b}`, sub: `${a} - ${b}`, mul: `${a} * ${b}`, div: `${a} / ${b}`,
      maximum: `max_f(${a}, ${b})`, minimum: `min_f(${a}, ${b})`, pow: `pow_f(${a}, ${b})`,
    };
    return f[op];
  }
  if (cmp) return bool(`${a} ${cmp} ${b}`);
  const i: Record<string, string> = {
    add: `${a} + ${b}`, sub: `${a} - ${b}`, mul: `${a} * ${b}`, div: `i_div(${a}, ${b})`,
    maximum: `max(${a}, ${b})`, minimum: `min(${a}, ${b})`,
  };
  return i[op];
}

function binary(op: BinaryOp, a: TensorView, b: TensorView, out: TensorView): void {
  const c = CLS[a.dtype];
  if (op === "pow" && c !== "f") throw new TypeError(`pow: integer tensors (${a.dtype}) are not supported; cast to float32`);
  strided(`binary:${op}`, [a, b], out, ([x, y]) => binaryExpr(op, c, x, y));
}

function where(cond: TensorView, a: TensorView, b: TensorView, out: TensorView): void {
  strided("where", [cond, a, b], out, ([c, x, y]) => `select(${y}, ${x}, ${c} != 0u)`);
}

/** The key naming a fused chain's code. */
export function fusedKey(steps: readonly FusedStep[]): string {
  return steps.map((s) => `${s.op}(${s.args.map((a) => ("input" in a ? `i${a.input}` : `s${a.step}`)).join(",")})`).join(";");
}

/** The f32 WGSL expression of a fused chain whose inputs are the expressions `xs`. */
export function fusedExpr(steps: readonly FusedStep[], xs: readonly string[]): string {
  const vals: string[] = [];
  for (const s of steps) {
    const a = s.args.map((o) => ("input" in o ? xs[o.input] : `(${vals[o.step]})`));
    vals.push(s.op in UNARY ? UNARY[s.op as UnaryOp](a[0]) : binaryExpr(s.op as BinaryOp, "f", a[0], a[1]));
  }
  return vals[vals.length - 1];
}

/** A fused chain (compile/): one generated WGSL expression per distinct chain, one dispatch. */
function fusedElementwise(steps: readonly FusedStep[], inputs: TensorView[], out: TensorView): void {
  strided(`fused:${fusedKey(steps)}`, inputs, out, (xs) => fusedExpr(steps, xs));
}

export const elementwiseKernels: Pick<KernelSignatures, "copy" | "unary" | "binary" | "where" | "fusedElementwise"> = { copy, unary, binary, where, fusedElementwise };
