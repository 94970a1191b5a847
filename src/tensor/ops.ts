/**
 * The op front-end: every computing op of tsorch. Each op validates its inputs (same device,
 * shapes, dtypes), computes the output shape, allocates the output on the inputs' device and calls
 * the kernel registered for that device type (devices/kernels.ts). Ops never branch on the device.
 *
 * Numerics: float16/bfloat16 inputs of elementwise/reduction ops are computed in float32 and the
 * result is cast back (as PyTorch does on cpu); linear/embedding/norm read half weights directly.
 */
import type { Device, WeightArena } from "../devices/device.js";
import { getKernel, hasKernel, type BinaryOp, type ReduceOp, type UnaryOp } from "../devices/kernels.js";
import { isFloating, itemsize, promoteTypes, type DType } from "./dtype.js";
import { encode } from "./host.js";
import { track } from "./scope.js";
import { traceObserver } from "./trace.js";
import { broadcastShapes, normAxis, numel, sameShape } from "./shape.js";
import { Tensor, type TensorLike } from "./tensor.js";

// ------------------------------------------------------------------ helpers

/** Allocate an uninitialised contiguous tensor (from `arena`, one of `device`'s, when given). */
export function empty(shape: readonly number[], dtype: DType, device: Device, arena?: WeightArena): Tensor {
  const nbytes = numel(shape) * itemsize(dtype);
  const storage = arena ? arena.allocate(nbytes) : device.allocate(nbytes);
  track(storage);
  traceObserver()?.allocated(storage);
  return new Tensor(storage, dtype, shape);
}

/** Throw when tensors live on different devices, naming both (as PyTorch does). */
export function checkSameDevice(op: string, ...ts: (Tensor | null | undefined)[]): Device {
  const present = ts.filter((t): t is Tensor => !!t);
  const dev = present[0].device;
  for (const t of present) {
    if (t.device !== dev) {
      throw new Error(`${op}: expected all tensors to be on the same device, but found at least two devices, ${dev.name} and ${t.device.name}`);
    }
  }
  return dev;
}

function scalarTensor(value: number, like: Tensor): Tensor {
  const dtype: DType = isFloating(like.dtype) ? like.dtype : Number.isInteger(value) && like.dtype !== "bool" ? like.dtype : "float32";
  return uploadScalar(value, dtype, like.device);
}

/** A 0-d tensor holding `value` on `device` (the scalar operand of an op). */
function uploadScalar(value: number, dtype: DType, device: Device): Tensor {
  const storage = device.upload(encode([value], dtype));
  traceObserver()?.uploaded(storage, 1);
  return new Tensor(storage, dtype, []);
}

function asTensor(x: TensorLike, like: Tensor): Tensor {
  return typeof x === "number" ? scalarTensor(x, like) : x;
}

/** Copy `x` into a new contiguous tensor of `dtype` on `device` (the engine of to/contiguous/cast). */
export function copyTo(x: Tensor, dtype: DType, device: Device): Tensor {
  if (device === x.device) {
    const out = empty(x.shape, dtype, device);
    if (x.numel > 0) getKernel("copy", device.type)(x, out);
    return out;
  }
  const src = x.contiguous();
  const readSync = src.device.readSync;
  if (!readSync) {
    throw new Error(`moving a tensor from ${src.device.name} to ${device.name} must wait for the device: use \`await tensor.toAsync("${device.name}")\``);
  }
  traceObserver()?.read(`moving a tensor from ${src.device.name} to ${device.name}`);
  const bytes = readSync.call(src.device, src.storage, src.byteOffset, src.numel * itemsize(src.dtype));
  const moved = new Tensor(device.upload(bytes.slice()), src.dtype, src.shape);
  return moved.dtype === dtype ? moved : copyTo(moved, dtype, device);
}

/** In-place copy of `src` into the (possibly strided) view `dst`; shapes must match. */
export function copyInto(src: Tensor, dst: Tensor): void {
  checkSameDevice("copy_", src, dst);
  if (!sameShape(src.shape, dst.shape)) src = src.expand(dst.shape as number[]);
  if (dst.numel > 0) getKernel("copy", dst.device.type)(src, dst);
}

/** Run `f` on float32 versions of half inputs and cast the result back (PyTorch's cpu half math). */
function viaFloat32(xs: Tensor[], f: (xs: Tensor[]) => Tensor): Tensor {
  const half = xs[0].dtype;
  if (half !== "float16" && half !== "bfloat16") return f(xs);
  const out = f(xs.map((x) => x.to("float32")));
  return out.dtype === "float32" ? out.to(half) : out;
}

// ------------------------------------------------------------------ elementwise

function unary(op: UnaryOp, x: Tensor): Tensor {
  const xf = isFloating(x.dtype) ? x : x.to("float32");
  return viaFloat32([xf], ([v]) => {
    const c = v.contiguous();
    const out = empty(c.shape, "float32", c.device);
    if (c.numel > 0) getKernel("unary", c.device.type)(op, c, out);
    return out;
  });
}

export const neg = (x: Tensor) => (isFloating(x.dtype) ? unary("neg", x) : mul(x, -1));
export const exp = (x: Tensor) => unary("exp", x);
export const log = (x: Tensor) => unary("log", x);
export const sqrt = (x: Tensor) => unary("sqrt", x);
export const rsqrt = (x: Tensor) => unary("rsqrt", x);
export const tanh = (x: Tensor) => unary("tanh", x);
export const sigmoid = (x: Tensor) => unary("sigmoid", x);
export const silu = (x: Tensor) => unary("silu", x);
/** GELU, exact (erf) form: torch.nn.functional.gelu(x). */
export const gelu = (x: Tensor) => unary("gelu", x);
/** GELU, tanh approximation: gelu(x, approximate="tanh") = HF "gelu_new"/"gelu_pytorch_tanh". */
export const geluTanh = (x: Tensor) => unary("gelu_tanh", x);
export const abs = (x: Tensor) => unary("abs", x);
export const sin = (x: Tensor) => unary("sin", x);
export const cos = (x: Tensor) => unary("cos", x);
export const relu = (x: Tensor) => unary("relu", x);
export const softplus = (x: Tensor) => unary("softplus", x);
export const reciprocal = (x: Tensor) => unary("reciprocal", x);
export const square = (x: Tensor) => unary("square", x);
export const erf = (x: Tensor) => unary("erf", x);

const COMPARISON = new Set<BinaryOp>(["eq", "ne", "lt", "le", "gt", "ge"]);
const LOGICAL = new Set<BinaryOp>(["logical_and", "logical_or"]);

function binary(op: BinaryOp, a0: TensorLike, b0: TensorLike): Tensor {
  if (typeof a0 === "number" && typeof b0 === "number") throw new TypeError(`${op}: at least one argument must be a tensor`);
  const like = (typeof a0 === "number" ? b0 : a0) as Tensor;
  let a = asTensor(a0, like), b = asTensor(b0, like);
  const device = checkSameDevice(op, a, b);
  const shape = broadcastShapes(a.shape, b.shape);
  let dtype: DType = LOGICAL.has(op) ? "bool" : promoteTypes(a.dtype, b.dtype);
  if (op === "div" && !isFloating(dtype)) dtype = "float32"; // true division, as torch.div
  if (dtype === "bool" && !LOGICAL.has(op) && !COMPARISON.has(op)) dtype = "int64";
  if (a.dtype !== dtype) a = a.to(dtype);
  if (b.dtype !== dtype) b = b.to(dtype);
  return viaFloat32([a, b], ([x, y]) => {
    const outDtype = COMPARISON.has(op) ? "bool" : x.dtype;
    const out = empty(shape, outDtype, device);
    if (out.numel > 0) getKernel("binary", device.type)(op, x.expand(shape), y.expand(shape), out);
    return out;
  });
}

export const add = (a: TensorLike, b: TensorLike) => binary("add", a, b);
export const sub = (a: TensorLike, b: TensorLike) => binary("sub", a, b);
export const mul = (a: TensorLike, b: TensorLike) => binary("mul", a, b);
export const div = (a: TensorLike, b: TensorLike) => binary("div", a, b);
export const pow = (a: TensorLike, b: TensorLike) => binary("pow", a, b);
export const maximum = (a: TensorLike, b: TensorLike) => binary("maximum", a, b);
export const minimum = (a: TensorLike, b: TensorLike) => binary("minimum", a, b);
export const eq = (a: TensorLike, b: TensorLike) => binary("eq", a, b);
export const ne = (a: TensorLike, b: TensorLike) => binary("ne", a, b);
export const lt = (a: TensorLike, b: TensorLike) => binary("lt", a, b);
export const le = (a: TensorLike, b: TensorLike) => binary("le", a, b);
export const gt = (a: TensorLike, b: TensorLike) => binary("gt", a, b);
export const ge = (a: TensorLike, b: TensorLike) => binary("ge", a, b);
export const logicalAnd = (a: Tensor, b: Tensor) => binary("logical_and", a.to("bool"), b.to("bool"));
export const logicalOr = (a: Tensor, b: Tensor) => binary("logical_or", a.to("bool"), b.to("bool"));
export const logicalNot = (a: Tensor) => eq(a.to("bool"), 0);

/** Elementwise cond ? a : b, broadcasting all three (torch.where). */
export function where(cond: Tensor, a0: TensorLike, b0: TensorLike): Tensor {
  const like = typeof a0 === "number" ? (typeof b0 === "number" ? null : b0) : a0;
  let a = like ? asTensor(a0, like) : uploadScalar(a0 as number, "float32", cond.device);
  let b = asTensor(b0, a);
  const device = checkSameDevice("where", cond, a, b);
  const shape = broadcastShapes(cond.shape, broadcastShapes(a.shape, b.shape));
  const dtype = promoteTypes(a.dtype, b.dtype);
  a = a.to(dtype); b = b.to(dtype);
  const c = cond.to("bool");
  return viaFloat32([a, b], ([x, y]) => {
    const out = empty(shape, x.dtype, device);
    if (out.numel > 0) getKernel("where", device.type)(c.expand(shape), x.expand(shape), y.expand(shape), out);
    return out;
  });
}

/** min(max(x, min), max) elementwise (torch.clamp); either bound may be null, not both. NaN stays
 * NaN; the dtype follows maximum/minimum with a scalar. Throws RangeError without bounds. */
export function clamp(x: Tensor, min: number | null = null, max: number | null = null): Tensor {
  if (min === null && max === null) throw new RangeError("clamp: at least one of min and max must be given");
  const lo = min === null ? x : maximum(x, min);
  return max === null ? lo : minimum(lo, max);
}

/** x with `value` where mask is true (torch.Tensor.masked_fill). */
export function maskedFill(x: Tensor, mask: Tensor, value: number): Tensor {
  return where(mask, uploadScalar(value, x.dtype, x.device), x);
}

// ------------------------------------------------------------------ reductions

/** Move `dim` last and make the tensor contiguous, so kernels reduce over rows. */
function lastAxis(x: Tensor, dim: number): { rows: Tensor; outShape: number[] } {
  const d = normAxis(dim, x.ndim);
  const order = [...x.shape.keys()].filter((i) => i !== d).concat(d);
  return { rows: x.permute(order).contiguous(), outShape: x.shape.filter((_, i) => i !== d) };
}

function reduce(op: ReduceOp, x: Tensor, dim: number | undefined, keepdim: boolean): Tensor {
  if (dim === undefined) {
    const r = reduce(op, x.reshape(-1), 0, false);
    return keepdim ? r.reshape(x.shape.map(() => 1)) : r;
  }
  const d = normAxis(dim, x.ndim);
  if (x.shape[d] === 0 && op !== "sum" && op !== "prod") throw new RangeError(`${op}: cannot reduce over an empty dimension`);
  const isArg = op === "argmax" || op === "argmin";
  const src = x.dtype === "bool" ? x.to("int64") : isFloating(x.dtype) && x.dtype !== "float32" ? x.to("float32") : x;
  const { rows, outShape } = lastAxis(src, d);
  const outDtype: DType = isArg ? "int64" : isFloating(src.dtype) ? "float32" : op === "sum" || op === "prod" ? "int64" : op === "mean" ? "float32" : src.dtype;
  const input = op === "mean" && !isFloating(src.dtype) ? rows.to("float32") : rows;
  let out = empty(outShape, outDtype, x.device);
  if (out.numel > 0) getKernel("reduce", x.device.type)(op, input, out);
  if (!isArg && (x.dtype === "float16" || x.dtype === "bfloat16")) out = out.to(x.dtype);
  return keepdim ? out.unsqueeze(d) : out;
}

export const sum = (x: Tensor, dim?: number, keepdim = false) => reduce("sum", x, dim, keepdim);
export const mean = (x: Tensor, dim?: number, keepdim = false) => reduce("mean", x, dim, keepdim);
export const max = (x: Tensor, dim?: number, keepdim = false) => reduce("max", x, dim, keepdim);
export const min = (x: Tensor, dim?: number, keepdim = false) => reduce("min", x, dim, keepdim);
export const prod = (x: Tensor, dim?: number, keepdim = false) => reduce("prod", x, dim, keepdim);
export const argmax = (x: Tensor, dim?: number, keepdim = false) => reduce("argmax", x, dim, keepdim);
export const argmin = (x: Tensor, dim?: number, keepdim = false) => reduce("argmin", x, dim, keepdim);

/** Inclusive cumulative sum along `dim` (float -> float32 math, ints/bool -> int64). */
export function cumsum(x: Tensor, dim: number): Tensor {
  const d = normAxis(dim, x.ndim);
  const src = isFloating(x.dtype) ? x.to("float32") : x.to("int64");
  const moved = src.transpose(d, -1).contiguous();
  const out = empty(moved.shape, src.dtype, x.device);
  if (out.numel > 0) getKernel("cumsum", x.device.type)(moved, out);
  const res = out.transpose(d, -1);
  return x.dtype === "float16" || x.dtype === "bfloat16" ? res.to(x.dtype) : res;
}

function softmaxImpl(x: Tensor, dim: number, logarithm: boolean): Tensor {
  const d = normAxis(dim, x.ndim);
  return viaFloat32([isFloating(x.dtype) ? x : x.to("float32")], ([v]) => {
    const moved = v.transpose(d, -1).contiguous();
    const out = empty(moved.shape, "float32", v.device);
    if (out.numel > 0) getKernel("softmax", v.device.type)(moved, out, logarithm);
    return out.transpose(d, -1);
  });
}

export const softmax = (x: Tensor, dim = -1) => softmaxImpl(x, dim, false);
export const logSoftmax = (x: Tensor, dim = -1) => softmaxImpl(x, dim, true);

/** Sort along `dim` (stable). Returns float32 values (for float inputs) and int64 indices. */
export function sort(x: Tensor, dim = -1, descending = false): { values: Tensor; indices: Tensor } {
  const d = normAxis(dim, x.ndim);
  const moved = x.to("float32").transpose(d, -1).contiguous();
  const values = empty(moved.shape, "float32", x.device), indices = empty(moved.shape, "int64", x.device);
  if (moved.numel > 0) getKernel("sort", x.device.type)(moved, values, indices, descending);
  return { values: values.transpose(d, -1), indices: indices.transpose(d, -1) };
}

/** The k largest elements along the last dim, largest first (torch.topk). */
export function topk(x: Tensor, k: number): { values: Tensor; indices: Tensor } {
  const n = x.shape[x.ndim - 1];
  if (!Number.isInteger(k) || k < 0 || k > n) throw new RangeError(`topk: k=${k} is out of range for a last dimension of size ${n}`);
  const rows = x.to("float32").contiguous();
  const shape = [...x.shape.slice(0, -1), k];
  const values = empty(shape, "float32", x.device), indices = empty(shape, "int64", x.device);
  if (values.numel > 0) getKernel("topk", x.device.type)(rows, k, values, indices);
  return { values, indices };
}

// ------------------------------------------------------------------ joining

/** Concatenate along `dim`; all tensors must share device and all dims but `dim`. */
export function cat(tensors: Tensor[], dim = 0): Tensor {
  if (tensors.length === 0) throw new RangeError("cat: expected a non-empty list of tensors");
  const device = checkSameDevice("cat", ...tensors);
  const first = tensors[0];
  const d = normAxis(dim, first.ndim);
  const dtype = tensors.map((t) => t.dtype).reduce(promoteTypes);
  for (const t of tensors) {
    if (t.ndim !== first.ndim || t.shape.some((s, i) => i !== d && s !== first.shape[i])) {
      throw new RangeError(`cat: sizes of tensors must match except in dimension ${dim}: got [${first.shape}] and [${t.shape}]`);
    }
  }
  const shape = [...first.shape];
  shape[d] = tensors.reduce((s, t) => s + t.shape[d], 0);
  const out = empty(shape, dtype, device);
  let at = 0;
  for (const t of tensors) {
    if (t.numel > 0) getKernel("copy", device.type)(t, out.narrow(d, at, t.shape[d]));
    at += t.shape[d];
  }
  return out;
}

export function stack(tensors: Tensor[], dim = 0): Tensor {
  return cat(tensors.map((t) => t.unsqueeze(dim)), dim);
}

// ------------------------------------------------------------------ linear algebra

function f32(x: Tensor): Tensor {
  return x.dtype === "float32" ? x : x.to("float32");
}

/** Matrix product with NumPy/PyTorch semantics (1-D operands, broadcast batch dims). float32 out. */
export function matmul(a0: Tensor, b0: Tensor): Tensor {
  const device = checkSameDevice("matmul", a0, b0);
  if (a0.ndim === 0 || b0.ndim === 0) throw new RangeError("matmul: both arguments need at least 1 dimension");
  const a = a0.ndim === 1 ? a0.unsqueeze(0) : a0;
  const b = b0.ndim === 1 ? b0.unsqueeze(1) : b0;
  const [M, K] = a.shape.slice(-2), [K2, N] = b.shape.slice(-2);
  if (K !== K2) throw new RangeError(`matmul: shapes [${a0.shape}] and [${b0.shape}] cannot be multiplied (${K} != ${K2})`);
  const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
  const B = numel(batch);
  const a3 = f32(a).expand([...batch, M, K]).reshape(B, M, K);
  const b3 = f32(b).expand([...batch, K, N]).reshape(B, K, N);
  const out = empty([B, M, N], "float32", device);
  if (out.numel > 0) getKernel("matmul", device.type)(a3, b3, out);
  let shape = [...batch, M, N];
  if (a0.ndim === 1) shape = shape.filter((_, i) => i !== shape.length - 2);
  if (b0.ndim === 1) shape = shape.slice(0, -1);
  return out.view(shape);
}

/** y = x @ w^T + bias (torch.nn.functional.linear). x [..., K]; w [N, K] in float32/16/bf16 as
 * stored; bias [N] or null. Returns float32 [..., N]. */
export function linear(x: Tensor, w: Tensor, bias: Tensor | null = null): Tensor {
  const device = checkSameDevice("linear", x, w, bias);
  const K = x.shape[x.ndim - 1];
  if (w.ndim !== 2 || w.shape[1] !== K) throw new RangeError(`linear: input [${x.shape}] and weight [${w.shape}] are incompatible (expected weight [N, ${K}])`);
  const N = w.shape[0];
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== N)) throw new RangeError(`linear: bias [${bias.shape}] does not match weight [${w.shape}]`);
  const x2 = f32(x).reshape(numel(x.shape.slice(0, -1)), K).contiguous();
  const out = empty([...x.shape.slice(0, -1), N], "float32", device);
  if (out.numel > 0) getKernel("linear", device.type)(x2, w.contiguous(), bias ? bias.contiguous() : null, out);
  return out;
}

/**
 * Linear with a weight chosen per row, for mixture-of-experts (MLX's gather_mm):
 * out[..., :] = x[..., :] @ weights[idx[...]]^T. x [..., K]; idx int32/int64 of x's leading shape;
 * weights: E tensors [N, K] of one dtype (float32/16/bf16 as stored). Returns float32 [..., N].
 * Routing stays on the device: idx is never read on the host here.
 */
export function gatherLinear(x: Tensor, weights: Tensor[], idx: Tensor): Tensor {
  const device = checkSameDevice("gather_linear", x, idx, ...weights);
  if (weights.length === 0) throw new RangeError("gather_linear: expected at least one weight");
  const K = x.shape[x.ndim - 1], [N] = weights[0].shape;
  for (const w of weights) {
    if (w.ndim !== 2 || w.shape[0] !== N || w.shape[1] !== K || w.dtype !== weights[0].dtype) {
      throw new RangeError(`gather_linear: weight [${w.shape}] (${w.dtype}) does not fit input [${x.shape}] and weight 0 [${weights[0].shape}] (${weights[0].dtype}): expected weights [N, ${K}] of one dtype`);
    }
  }
  if (idx.dtype !== "int32" && idx.dtype !== "int64") throw new TypeError(`gather_linear: idx must be int32 or int64, got ${idx.dtype}`);
  if (!sameShape(idx.shape, x.shape.slice(0, -1))) throw new RangeError(`gather_linear: idx [${idx.shape}] must have the leading shape of input [${x.shape}]`);
  const out = empty([...x.shape.slice(0, -1), N], "float32", device);
  if (out.numel > 0) {
    getKernel("gatherLinear", device.type)(f32(x).reshape(numel(x.shape.slice(0, -1)), K).contiguous(), weights.map((w) => w.contiguous()), idx.to("int64").reshape(-1).contiguous(), out);
  }
  return out;
}

/**
 * The routed experts of a mixture-of-experts block with silu-gated MLPs (transformers'
 * Qwen3MoeExperts / MixtralExperts forward, routing already done):
 * out[t] = sum_j weights[t, j] * down[e] @ (silu(gate[e] @ x[t]) * up[e] @ x[t]), e = ids[t, j].
 * x [T, H] (float); gateUp [E, 2I, H] (expert e's gate in rows 0..I, up in rows I..2I) and down
 * [E, H, I], of one float dtype as stored; weights [T, K] float; ids int32/int64 [T, K] in [0, E).
 * Returns float32 [T, H]. One fused kernel where the device has one (cpu: no [T*K, H] copies of x,
 * gate and up in one GEMM, the weighting and the sum over slots folded into the last pass);
 * elsewhere the same products through gatherLinear. Throws RangeError on mismatched shapes,
 * TypeError on bad dtypes (ids are checked by the kernel where it can read them).
 */
export function moeExperts(x: Tensor, gateUp: Tensor, down: Tensor, weights: Tensor, ids: Tensor): Tensor {
  const device = checkSameDevice("moe_experts", x, gateUp, down, weights, ids);
  if (x.ndim !== 2 || gateUp.ndim !== 3 || down.ndim !== 3 || weights.ndim !== 2) {
    throw new RangeError(`moe_experts: expected x [T, H], gateUp [E, 2I, H], down [E, H, I], weights [T, K]; got x [${x.shape}], gateUp [${gateUp.shape}], down [${down.shape}], weights [${weights.shape}]`);
  }
  const [T, H] = x.shape, [E, I2] = gateUp.shape, I = I2 / 2;
  if (gateUp.shape[2] !== H || I2 % 2 !== 0 || !sameShape(down.shape, [E, H, I]) || weights.shape[0] !== T || !sameShape(ids.shape, weights.shape)) {
    throw new RangeError(`moe_experts: x [${x.shape}], gateUp [${gateUp.shape}], down [${down.shape}], weights [${weights.shape}] and ids [${ids.shape}] do not fit x [T, H], gateUp [E, 2I, H], down [E, H, I], weights and ids [T, K]`);
  }
  for (const [name, t] of [["x", x], ["gateUp", gateUp], ["down", down], ["weights", weights]] as const) {
    if (!isFloating(t.dtype)) throw new TypeError(`moe_experts: ${name} must be a float tensor, got ${t.dtype}`);
  }
  if (down.dtype !== gateUp.dtype) throw new TypeError(`moe_experts: gateUp (${gateUp.dtype}) and down (${down.dtype}) must have one dtype`);
  if (ids.dtype !== "int32" && ids.dtype !== "int64") throw new TypeError(`moe_experts: ids must be int32 or int64, got ${ids.dtype}`);
  const K = ids.shape[1];
  if (hasKernel("moeExperts", device.type)) {
    const out = empty([T, H], "float32", device);
    if (out.numel > 0) getKernel("moeExperts", device.type)(f32(x).contiguous(), gateUp.contiguous(), down.contiguous(), f32(weights).contiguous(), ids.to("int64").contiguous(), out);
    return out;
  }
  const rows = x.unsqueeze(1).expand(T, K, H).reshape(T * K, H), idx = ids.reshape(T * K);
  const experts = Array.from({ length: E }, (_, e) => e);
  const project = (w: (e: number) => Tensor, input: Tensor) => gatherLinear(input, experts.map(w), idx);
  const h = mul(silu(project((e) => gateUp.select(0, e).narrow(0, 0, I), rows)), project((e) => gateUp.select(0, e).narrow(0, I, I), rows));
  return sum(mul(project((e) => down.select(0, e), h).view(T, K, H), f32(weights).unsqueeze(2)), 1);
}

export interface AttentionOptions {
  /** Boolean (true = attend) or float additive mask, broadcastable to [B, Hq, Lq, Lk]. */
  mask?: Tensor | null;
  /** Default 1/sqrt(D). */
  scale?: number;
  /** Causal mask aligned to the end: query i (of Lq) sees keys j <= i + Lk - Lq. */
  isCausal?: boolean;
  /** Sliding window: with isCausal, each query sees at most the last `window` keys. */
  window?: number;
  /** Tanh soft-capping of the scores (Gemma 2). */
  softcap?: number;
  /**
   * Attention sinks [Hq] (gpt-oss): per query head one more logit joins the softmax after scaling
   * and masking, and its column is dropped, so each row's weights sum below 1.
   */
  sinks?: Tensor | null;
}

/**
 * Scaled dot-product attention with grouped-query heads (torch's scaled_dot_product_attention
 * with enable_gqa, plus soft-capping and sliding windows as in transformers' eager attention).
 * q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] -> float32 [B, Hq, Lq, Dv] (a transposed
 * view of a contiguous [B, Lq, Hq, Dv] buffer, so `.transpose(1, 2).reshape(B, Lq, Hq*Dv)` is free).
 * Arithmetic is float32; k and v both float16 or both bfloat16 (a half-precision KV cache) are read
 * as stored, without a float32 copy.
 */
export function scaledDotProductAttention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  const device = checkSameDevice("scaled_dot_product_attention", q, k, v, opts.mask, opts.sinks);
  if (q.ndim !== 4 || k.ndim !== 4 || v.ndim !== 4) throw new RangeError(`scaled_dot_product_attention: expected 4-D q, k, v, got [${q.shape}], [${k.shape}], [${v.shape}]`);
  const [B, Hq, Lq, D] = q.shape, [Bk, Hkv, Lk, Dk] = k.shape, [Bv, Hv, Lv, Dv] = v.shape;
  if (Bk !== B || Bv !== B || Dk !== D || Hv !== Hkv || Lv !== Lk || Hq % Hkv !== 0) {
    throw new RangeError(`scaled_dot_product_attention: incompatible shapes q [${q.shape}], k [${k.shape}], v [${v.shape}]`);
  }
  if (opts.sinks && (opts.sinks.ndim !== 1 || opts.sinks.shape[0] !== Hq)) {
    throw new RangeError(`scaled_dot_product_attention: sinks [${opts.sinks.shape}] must be [${Hq}] (one per query head)`);
  }
  let mask: Tensor | null = null;
  if (opts.mask) {
    const m = opts.mask.dtype === "bool" ? where(opts.mask, 0, -Infinity) : f32(opts.mask);
    mask = m.expand([B, Hq, Lq, Lk]);
    if (mask.strides[3] !== 1 && Lk > 1) mask = mask.contiguous();
  }
  const out = empty([B, Lq, Hq, Dv], "float32", device);
  if (out.numel > 0) {
    // A half-precision KV cache is read as stored; mixed or other dtypes are converted to float32.
    const half = (k.dtype === "float16" || k.dtype === "bfloat16") && v.dtype === k.dtype;
    getKernel("sdpa", device.type)(f32(q), half ? k : f32(k), half ? v : f32(v), mask, out, {
      scale: opts.scale ?? 1 / Math.sqrt(D),
      softcap: opts.softcap ?? 0,
      causalOffset: opts.isCausal ? Lk - Lq : -1,
      window: opts.window ?? 0,
      sinks: opts.sinks ? f32(opts.sinks).contiguous() : null,
    });
  }
  return out.transpose(1, 2);
}

// ------------------------------------------------------------------ normalisation, rotary, lookup

/** RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * (offset + w). float32 out.
 * offset = 1 gives Gemma's (1 + weight) form. */
export function rmsNorm(x: Tensor, w: Tensor, eps: number, offset = 0): Tensor {
  checkSameDevice("rms_norm", x, w);
  const n = x.shape[x.ndim - 1];
  if (w.ndim !== 1 || w.shape[0] !== n) throw new RangeError(`rms_norm: weight [${w.shape}] does not match input [${x.shape}]`);
  const xc = f32(x).contiguous();
  const out = empty(x.shape, "float32", x.device);
  if (out.numel > 0) getKernel("rmsNorm", x.device.type)(xc, w.contiguous(), out, eps, offset);
  return out;
}

/**
 * Causal depthwise conv1d over time without bias, with a carried state (nn.Conv1d with groups =
 * channels and left padding K - 1, as transformers' causal_conv1d_fn / causal_conv1d_update
 * fallbacks in models/qwen3_5/modeling_qwen3_5.py): x [B, L, C]; weight [C, 1, K] or [C, K] (any
 * float dtype); state [B, K - 1, C] (the inputs before x) or null (zeros).
 *   out[b, t, c] = sum_i weight[c, i] * [state; x][b, t + i, c]
 * Returns out [B, L, C] and the new state [B, K - 1, C] (the last K - 1 rows of [state; x]),
 * float32. Throws RangeError on inconsistent shapes.
 */
export function causalConv1d(x: Tensor, weight: Tensor, state: Tensor | null): { out: Tensor; state: Tensor } {
  const device = checkSameDevice("causal_conv1d", x, weight, state);
  const [B, L, C] = x.shape;
  const K = weight.shape[weight.ndim - 1];
  const okWeight = (weight.ndim === 2 || (weight.ndim === 3 && weight.shape[1] === 1)) && weight.shape[0] === C && K >= 1;
  if (x.ndim !== 3 || !okWeight || (state !== null && !sameShape(state.shape, [B, K - 1, C]))) {
    throw new RangeError(`causal_conv1d: x [${x.shape}], weight [${weight.shape}]${state ? `, state [${state.shape}]` : ""} are incompatible ` +
      "(expected x [B, L, C], weight [C, 1, K] or [C, K], state [B, K - 1, C])");
  }
  const out = empty([B, L, C], "float32", device);
  const newState = empty([B, K - 1, C], "float32", device);
  if (out.numel + newState.numel > 0) {
    getKernel("causalConv1d", device.type)(f32(x).contiguous(), f32(weight).reshape(C, K).contiguous(), state ? f32(state).contiguous() : null, out, newState);
  }
  return { out, state: newState };
}

/**
 * The gated delta rule (Gated DeltaNet linear attention; transformers' torch_recurrent_gated_delta_rule
 * in models/qwen3_5/modeling_qwen3_5.py, without its q/k l2norm and q scaling, which the caller
 * applies). q, k [B, L, H, Dk]; v [B, L, H, Dv]; g (log decay, <= 0) and beta [B, L, H]; state
 * [B, H, Dk, Dv] or null (zeros). Per token t, with S the state:
 *   S = S * exp(g_t);  S = S + k_t (beta_t (v_t - k_t^T S))^T;  o_t = q_t^T S.
 * Returns out [B, L, H, Dv] and the final state [B, H, Dk, Dv], both float32. One fused scan on
 * the device: memory does not grow with L beyond the inputs and output. Throws RangeError on
 * inconsistent shapes.
 */
export function gatedDeltaRule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor | null): { out: Tensor; state: Tensor } {
  const device = checkSameDevice("gated_delta_rule", q, k, v, g, beta, state);
  const [B, L, H, Dk] = q.shape, Dv = v.shape[3];
  const bad = q.ndim !== 4 || !sameShape(k.shape, q.shape) || v.ndim !== 4 || !sameShape(v.shape.slice(0, 3), [B, L, H])
    || !sameShape(g.shape, [B, L, H]) || !sameShape(beta.shape, [B, L, H]) || (state !== null && !sameShape(state.shape, [B, H, Dk, Dv]));
  if (bad) {
    throw new RangeError(`gated_delta_rule: q [${q.shape}], k [${k.shape}], v [${v.shape}], g [${g.shape}], beta [${beta.shape}]` +
      `${state ? `, state [${state.shape}]` : ""} are incompatible (expected q, k [B, L, H, Dk], v [B, L, H, Dv], g, beta [B, L, H], state [B, H, Dk, Dv])`);
  }
  const c = (t: Tensor) => f32(t).contiguous();
  const out = empty([B, L, H, Dv], "float32", device);
  const newState = empty([B, H, Dk, Dv], "float32", device);
  if (newState.numel > 0) getKernel("gatedDeltaRule", device.type)(c(q), c(k), c(v), c(g), c(beta), state ? c(state) : null, out, newState);
  return { out, state: newState };
}

/** LayerNorm over the last dim (biased variance), optional weight and bias. float32 out. */
export function layerNorm(x: Tensor, w: Tensor | null, b: Tensor | null, eps: number): Tensor {
  checkSameDevice("layer_norm", x, w, b);
  const n = x.shape[x.ndim - 1];
  for (const p of [w, b]) if (p && (p.ndim !== 1 || p.shape[0] !== n)) throw new RangeError(`layer_norm: parameter [${p.shape}] does not match input [${x.shape}]`);
  const out = empty(x.shape, "float32", x.device);
  if (out.numel > 0) getKernel("layerNorm", x.device.type)(f32(x).contiguous(), w?.contiguous() ?? null, b?.contiguous() ?? null, out, eps);
  return out;
}

/**
 * Throws applyRotary's errors (devices, then shapes) unless applyRotary(x, cos, sin) may run: x
 * [B, L, H, D] and cos/sin of one shape [B, L, R], R <= D even, all on one device.
 */
export function checkRotary(x: Tensor, cos: Tensor, sin: Tensor): void {
  checkSameDevice("rotary", x, cos, sin);
  const [B, L, , D] = x.shape;
  const R = cos.shape[cos.ndim - 1];
  if (x.ndim !== 4 || cos.ndim !== 3 || cos.shape[0] !== B || cos.shape[1] !== L || R > D || R % 2 || !sameShape(cos.shape, sin.shape)) {
    throw new RangeError(`rotary: x [${x.shape}] and cos/sin [${cos.shape}]/[${sin.shape}] are incompatible`);
  }
}

/**
 * Rotary position embedding (transformers' apply_rotary_pos_emb with rotate_half), applied to
 * x [B, L, H, D] (heads not yet transposed) with cos/sin [B, L, R], R <= D even; dims >= R pass
 * through (partial rotary). float32 out [B, L, H, D].
 */
export function applyRotary(x: Tensor, cos: Tensor, sin: Tensor): Tensor {
  checkRotary(x, cos, sin);
  const out = empty(x.shape, "float32", x.device);
  if (out.numel > 0) getKernel("rotary", x.device.type)(f32(x).contiguous(), f32(cos).contiguous(), f32(sin).contiguous(), out);
  return out;
}

/**
 * MXFP4 (OCP microscaling FP4) to float32, as transformers' convert_moe_packed_tensors: blocks
 * int32 [..., nb, 4] hold each block's 16 packed bytes as 4 little-endian words (32 e2m1 codes, low
 * nibble first); scales int32 [..., ceil(nb / 4)] hold each row's nb uint8 exponents (bias 127),
 * padded to whole words. Returns float32 [..., nb * 32]: code value × 2^(scale − 127).
 */
export function dequantizeMxfp4(blocks: Tensor, scales: Tensor): Tensor {
  checkSameDevice("dequantize_mxfp4", blocks, scales);
  const nb = blocks.shape[blocks.ndim - 2], lead = blocks.shape.slice(0, -2);
  if (blocks.dtype !== "int32" || scales.dtype !== "int32" || blocks.ndim < 2 || blocks.shape[blocks.ndim - 1] !== 4 ||
      !sameShape(scales.shape, [...lead, Math.ceil(nb / 4)])) {
    throw new RangeError(`dequantize_mxfp4: expected int32 blocks [..., nb, 4] and scales [..., ceil(nb / 4)], got ${blocks.dtype} [${blocks.shape}] and ${scales.dtype} [${scales.shape}]`);
  }
  const R = numel(lead);
  const out = empty([...lead, nb * 32], "float32", blocks.device);
  if (out.numel > 0) getKernel("dequantMxfp4", blocks.device.type)(blocks.reshape(R, nb, 4).contiguous(), scales.reshape(R, Math.ceil(nb / 4)).contiguous(), out);
  return out;
}

/**
 * Block-quantize a weight w [N, K] (float32/16/bf16, K a multiple of 32) as llama.cpp's q8_0
 * (bits 8: code = round(x / d), d = max|x| / 127) or q4_0 (bits 4: d = m / -8 with m the value of
 * largest magnitude, code = min(15, trunc(x / d + 8.5)), value = (code - 8) * d), per block of 32
 * along K, with float32 scales. Returns q int32 [N, K * bits / 32] (packed bytes, see
 * KernelSignatures.quantizeBlocks) and scales float32 [N, K / 32]. With `arena` (one of w's
 * device, Device.weightArena; an arena of another device throws) both are allocated from it.
 */
export function quantizeBlocks(w: Tensor, bits: 4 | 8, arena?: WeightArena): { q: Tensor; scales: Tensor } {
  if (bits !== 4 && bits !== 8) throw new RangeError(`quantize_blocks: bits must be 4 or 8, got ${bits}`);
  if (arena && arena.device !== w.device) {
    throw new Error(`quantize_blocks: expected the weight arena on the weight's device, but found two devices, ${w.device.name} (weight) and ${arena.device.name} (arena)`);
  }
  if (w.ndim !== 2 || w.shape[1] % 32 !== 0 || !isFloating(w.dtype)) {
    throw new RangeError(`quantize_blocks: expected a float weight [N, K] with K a multiple of 32, got ${w.dtype} [${w.shape}]`);
  }
  const [N, K] = w.shape;
  const q = empty([N, (K * bits) / 32], "int32", w.device, arena), scales = empty([N, K / 32], "float32", w.device, arena);
  if (q.numel > 0) getKernel("quantizeBlocks", w.device.type)(w.contiguous(), bits, q, scales);
  return { q, scales };
}

/**
 * linear with a block-quantized weight: x [..., K] @ W^T + bias, W given as quantizeBlocks returns
 * it (q int32 [N, K * bits / 32], scales float32 [N, K / 32]). Returns float32 [..., N].
 */
export function linearQuantized(x: Tensor, q: Tensor, scales: Tensor, bits: 4 | 8, bias: Tensor | null = null): Tensor {
  const device = checkSameDevice("linear_quantized", x, q, scales, bias);
  const K = x.shape[x.ndim - 1], N = q.shape[0];
  if (bits !== 4 && bits !== 8) throw new RangeError(`linear_quantized: bits must be 4 or 8, got ${bits}`);
  if (K % 32 !== 0 || q.dtype !== "int32" || scales.dtype !== "float32" || !sameShape(q.shape, [N, (K * bits) / 32]) || !sameShape(scales.shape, [N, K / 32])) {
    throw new RangeError(`linear_quantized: input [${x.shape}] does not fit ${bits}-bit weight ${q.dtype} [${q.shape}] with scales ${scales.dtype} [${scales.shape}] (expected int32 [N, ${(K * bits) / 32}] and float32 [N, ${K / 32}], K a multiple of 32)`);
  }
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== N)) throw new RangeError(`linear_quantized: bias [${bias.shape}] does not match ${N} outputs`);
  const x2 = f32(x).reshape(numel(x.shape.slice(0, -1)), K).contiguous();
  const out = empty([...x.shape.slice(0, -1), N], "float32", device);
  if (out.numel > 0) getKernel("linearQuantized", device.type)(x2, q.contiguous(), scales.contiguous(), bits, bias ? bias.contiguous() : null, out);
  return out;
}

/** One block-quantized weight of linearQuantizedGroup (as linearQuantized takes it). */
export interface QuantizedLinearWeight { q: Tensor; scales: Tensor; bits: 4 | 8; bias: Tensor | null }

/**
 * linearQuantized(x, w.q, w.scales, w.bits, w.bias) for each of `ws` (1-3 weights with one input
 * size): [...x.shape[:-1], N_i] float32 each. On a device with a linearQuantizedGroup kernel (cpu),
 * weights of one bit width run in one call that quantizes x once; elsewhere, one linearQuantized
 * each. Errors as linearQuantized's.
 */
export function linearQuantizedGroup(x: Tensor, ws: readonly QuantizedLinearWeight[]): Tensor[] {
  const device = x.device, bits = ws[0]?.bits;
  const grouped = ws.length >= 2 && ws.length <= 3 && ws.every((w) => w.bits === bits) && hasKernel("linearQuantizedGroup", device.type);
  if (!grouped) return ws.map((w) => linearQuantized(x, w.q, w.scales, w.bits, w.bias));
  const K = x.shape[x.ndim - 1];
  for (const w of ws) {
    checkSameDevice("linear_quantized", x, w.q, w.scales, w.bias);
    const N = w.q.shape[0];
    if (K % 32 !== 0 || w.q.dtype !== "int32" || w.scales.dtype !== "float32" || !sameShape(w.q.shape, [N, (K * bits) / 32]) || !sameShape(w.scales.shape, [N, K / 32])) {
      throw new RangeError(`linear_quantized: input [${x.shape}] does not fit ${bits}-bit weight ${w.q.dtype} [${w.q.shape}] with scales ${w.scales.dtype} [${w.scales.shape}] (expected int32 [N, ${(K * bits) / 32}] and float32 [N, ${K / 32}], K a multiple of 32)`);
    }
    if (w.bias && (w.bias.ndim !== 1 || w.bias.shape[0] !== N)) throw new RangeError(`linear_quantized: bias [${w.bias.shape}] does not match ${N} outputs`);
  }
  const x2 = f32(x).reshape(numel(x.shape.slice(0, -1)), K).contiguous();
  const outs = ws.map((w) => empty([...x.shape.slice(0, -1), w.q.shape[0]], "float32", device));
  if (x2.shape[0] > 0) {
    getKernel("linearQuantizedGroup", device.type)(x2, ws.map((w) => w.q.contiguous()), ws.map((w) => w.scales.contiguous()),
      ws.map((w) => (w.bias ? w.bias.contiguous() : null)), bits!, outs);
  }
  return outs;
}

/** Rows of `table` [V, dim] at integer `ids` (any shape) -> float32 [...ids.shape, dim]. */
export function embedding(ids: Tensor, table: Tensor): Tensor {
  checkSameDevice("embedding", ids, table);
  if (ids.dtype !== "int32" && ids.dtype !== "int64") throw new TypeError(`embedding: ids must be int32 or int64, got ${ids.dtype}`);
  if (table.ndim !== 2) throw new RangeError(`embedding: table must be 2-D, got [${table.shape}]`);
  const out = empty([...ids.shape, table.shape[1]], "float32", ids.device);
  if (out.numel > 0) getKernel("embedding", ids.device.type)(table.contiguous(), ids.contiguous(), out);
  return out;
}
