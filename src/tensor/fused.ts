/**
 * Fused ops that nn modules call directly in eager mode (as PyTorch modules call the fused
 * F.scaled_dot_product_attention): each is one kernel call where the device registers the fused
 * kernels that compile/'s passes make (devices/kernels.ts: fusedElementwise, linearGroup, linearAdd,
 * linearGroupLinearAdd, rotaryKVWrite),
 * and the composition of the plain ops elsewhere. The fused kernels compute each element with the
 * same kernels as the plain ops (cpu: linear_group.cc, the eager rms_norm, gemm_range and
 * fused_elementwise), so both ways give the same values. Each first checks, as the plain ops do,
 * that its tensors are on one device (checkSameDevice's error).
 *
 * While a trace observer is installed (compile/'s capture) they always run as the plain ops, so a
 * captured graph holds the canonical ops and compile/'s passes choose the fusions themselves.
 */
import { hasKernel, getKernel, kernelTakesPools, type FusedStep, type OpName } from "../devices/kernels.js";
import { isFloating } from "./dtype.js";
import { add, applyRotary, checkSameDevice, copyInto, empty, linear, mul, rmsNorm, silu } from "./ops.js";
import { numel, sameShape } from "./shape.js";
import { Tensor } from "./tensor.js";
import { traceObserver } from "./trace.js";

/** The chain silu(input 0) * input 1 (fusedElementwise's steps; the epilogue of a gated MLP). */
export const SILU_MUL: readonly FusedStep[] = [
  { op: "silu", args: [{ input: 0 }] },
  { op: "mul", args: [{ step: 0 }, { input: 1 }] },
];

/** Whether the eager fused kernel `op` may run for tensors on `device` (registered, not tracing). */
function fusable(op: OpName, t: Tensor): boolean {
  return traceObserver() === null && hasKernel(op, t.device.type);
}

/**
 * silu(gate) * up (transformers' act_fn(gate_proj(x)) * up_proj(x) with act "silu") in one pass:
 * gate and up float32 of one shape -> float32 of that shape. Other dtypes or broadcasting shapes run
 * as mul(silu(gate), up) (its dtype rules).
 */
export function siluMul(gate: Tensor, up: Tensor): Tensor {
  checkSameDevice("silu_mul", gate, up);
  if (gate.dtype !== "float32" || up.dtype !== "float32" || !sameShape(gate.shape, up.shape) || !fusable("fusedElementwise", gate)) {
    return mul(silu(gate), up);
  }
  const out = empty(gate.shape, "float32", gate.device);
  if (out.numel > 0) getKernel("fusedElementwise", gate.device.type)(SILU_MUL, [gate, up], out);
  return out;
}

/** An RMS norm given as its parameters (rmsNorm(x, weight, eps, offset)). */
export interface RmsNormParams {
  readonly weight: Tensor;
  readonly eps: number;
  readonly offset: number;
}

/**
 * A pre-norm gated MLP block with its residual (LlamaMLP after post_attention_layernorm, and the
 * residual add of LlamaDecoderLayer):
 *   n = rmsNorm(x, norm) (or x when norm is null);  out = residual + down(silu(gate n) * (up n)) + downBias.
 * x float [..., K]; gate and up [I, K], down [N, I] float weights (float32/16/bf16 as stored; no
 * gate/up bias); downBias [N] or null; residual [..., N] float32. Returns float32 [..., N]. One
 * linearGroupLinearAdd call where the device has it (else linearGroup with the SiLU * up epilogue,
 * then linearAdd), else the plain ops (same values). Shape errors are those of linear.
 */
export function gatedMlpResidual(x: Tensor, norm: RmsNormParams | null, gate: Tensor, up: Tensor, down: Tensor,
                                 downBias: Tensor | null, residual: Tensor): Tensor {
  checkSameDevice("gated_mlp_residual", x, norm?.weight, gate, up, down, downBias, residual);
  const K = x.shape[x.ndim - 1], M = numel(x.shape.slice(0, -1)), N = down.shape[0];
  const fits = x.dtype === "float32" && residual.dtype === "float32" && M > 0 && gate.ndim === 2 && sameShape(gate.shape, up.shape)
    && gate.shape[1] === K && down.ndim === 2 && down.shape[1] === gate.shape[0] && sameShape(residual.shape, [...x.shape.slice(0, -1), N])
    && [gate, up, down].every((w) => isFloating(w.dtype)) && (!downBias || (downBias.ndim === 1 && downBias.shape[0] === N))
    && (!norm || (norm.weight.ndim === 1 && norm.weight.shape[0] === K));
  const whole = fits && fusable("linearGroupLinearAdd", x);
  if (!whole && !(fits && fusable("linearGroup", x) && hasKernel("linearAdd", x.device.type))) {
    const n = norm ? rmsNorm(x, norm.weight, norm.eps, norm.offset) : x;
    return add(residual, linear(siluMul(linear(n, gate), linear(n, up)), down, downBias));
  }
  const dev = x.device.type, I = gate.shape[0];
  const args = [x.reshape(M, K).contiguous(), norm && { weight: norm.weight.contiguous(), eps: norm.eps, offset: norm.offset },
    [gate.contiguous(), up.contiguous()], SILU_MUL] as const;
  const rest = [down.contiguous(), downBias?.contiguous() ?? null, residual.reshape(M, N).contiguous()] as const;
  const out = empty(residual.shape, "float32", x.device);
  if (whole) {
    getKernel("linearGroupLinearAdd", dev)(args[0], args[1], [...args[2]], args[3], ...rest, out.view(M, N));
  } else {
    const h = empty([M, I], "float32", x.device);
    getKernel("linearGroup", dev)(args[0], args[1], [...args[2]], [h], args[3]);
    getKernel("linearAdd", dev)(h, ...rest, out.view(M, N));
  }
  return out;
}

/**
 * residual + linear(x, w, bias) (an output projection and the residual add after it): x float
 * [..., K], w [N, K] float (as stored), bias [N] or null, residual [..., N] float32. Returns float32
 * [..., N]. One linearAdd call where the device has it, else the plain ops (same values).
 */
export function linearResidual(x: Tensor, w: Tensor, bias: Tensor | null, residual: Tensor): Tensor {
  checkSameDevice("linear_residual", x, w, bias, residual);
  const K = x.shape[x.ndim - 1], M = numel(x.shape.slice(0, -1)), N = w.shape[0];
  const fits = residual.dtype === "float32" && M > 0 && w.ndim === 2 && w.shape[1] === K && isFloating(w.dtype)
    && sameShape(residual.shape, [...x.shape.slice(0, -1), N]) && (!bias || (bias.ndim === 1 && bias.shape[0] === N));
  if (!fits || !fusable("linearAdd", x)) return add(residual, linear(x, w, bias));
  const out = empty(residual.shape, "float32", x.device);
  const x2 = (x.dtype === "float32" ? x : x.to("float32")).reshape(M, K).contiguous();
  getKernel("linearAdd", x.device.type)(x2, w.contiguous(), bias?.contiguous() ?? null, residual.reshape(M, N).contiguous(), out.view(M, N));
  return out;
}

/**
 * linear(rmsNorm(x, norm), w) for each of `ws` (1-3 weights reading one normalized input: an
 * attention's q/k/v after input_layernorm): x float [..., K]; ws [N_i, K] float (as stored, no bias);
 * norm or null (no norm). Returns float32 [..., N_i] each. One linearGroup call where the device
 * has it (the norm computed once inside), else the plain ops (same values).
 */
export function normLinears(x: Tensor, norm: RmsNormParams | null, ws: readonly Tensor[]): Tensor[] {
  checkSameDevice("norm_linears", x, norm?.weight, ...ws);
  const K = x.shape[x.ndim - 1], M = numel(x.shape.slice(0, -1));
  const fits = x.dtype === "float32" && M > 0 && ws.length >= 1 && ws.length <= 3 && ws.every((w) => w.ndim === 2 && w.shape[1] === K && isFloating(w.dtype))
    && (!norm || (norm.weight.ndim === 1 && norm.weight.shape[0] === K));
  if (!fits || !fusable("linearGroup", x)) {
    const n = norm ? rmsNorm(x, norm.weight, norm.eps, norm.offset) : x;
    return ws.map((w) => linear(n, w));
  }
  const outs = ws.map((w) => empty([...x.shape.slice(0, -1), w.shape[0]], "float32", x.device));
  getKernel("linearGroup", x.device.type)(x.reshape(M, K).contiguous(), norm && { weight: norm.weight.contiguous(), eps: norm.eps, offset: norm.offset },
    ws.map((w) => w.contiguous()), outs.map((o) => o.view(M, o.shape[o.ndim - 1])));
  return outs;
}

/** Per-head RMS norms of q and k before their rotary (Qwen3Attention's q_norm / k_norm): weights [D], eps, weight offset. */
export interface QKNormParams {
  readonly q: Tensor;
  readonly k: Tensor;
  readonly eps: number;
  readonly offset: number;
}

/**
 * A decode step's rotary and KV-cache write (transformers' apply_rotary_pos_emb, then
 * cache.update): rotary(k) and v written into positions [at, at + L) of every sequence of the
 * position-major cache buffers kBuf [B, capacity, Hkv, D] / vBuf [B, capacity, Hkv, Dv]
 * (contiguous, float32/16/bf16 as stored), and rotary(q) returned. q [B, L, Hq, D], k [B, L, Hkv, D],
 * v [B, L, Hkv, Dv] float; cos/sin [B, L, R] as applyRotary (one shape, R <= D even). With qkNorm,
 * q and k are first rmsNorm(q, qkNorm.q, eps, offset) and rmsNorm(k, qkNorm.k, …) (Qwen3's
 * q_norm / k_norm, in Qwen3Attention.forward before apply_rotary_pos_emb). Returns float32
 * [B, L, Hq, D]. One rotaryKVWrite call (normRotaryKVWrite with the norms; the buffers as pools of
 * B blocks of `capacity` slots) where the device has it for these buffers and everything fits,
 * else rmsNorm, applyRotary and copyInto (same values, same op order). Shapes that do not fit throw
 * before anything is written: rmsNorm's or applyRotary's error, or a RangeError when k or v does
 * not fit its buffer at [at, at + L).
 */
export function rotaryCacheWrite(q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor, kBuf: Tensor, vBuf: Tensor, at: number,
                                 qkNorm: QKNormParams | null = null): Tensor {
  checkSameDevice("rotary_cache_write", q, k, v, cos, sin, kBuf, vBuf, qkNorm?.q, qkNorm?.k);
  // The norms as ops of their own, then the rest as without them.
  const normsFirst = (n: QKNormParams) => rotaryCacheWrite(rmsNorm(q, n.q, n.eps, n.offset), rmsNorm(k, n.k, n.eps, n.offset), v, cos, sin, kBuf, vBuf, at);
  if (qkNorm) {
    const D = k.shape[k.ndim - 1], op = "normRotaryKVWrite";
    const fused = q.ndim === 4 && k.ndim === 4 && q.shape[3] === D && [qkNorm.q, qkNorm.k].every((w) => w.ndim === 1 && w.shape[0] === D && w.dtype === qkNorm.q.dtype && isFloating(w.dtype))
      && fusable(op, q) && kernelTakesPools(op, q.device.type, kBuf.dtype);
    if (!fused) return normsFirst(qkNorm);
  }
  const [B, L, Hkv, D] = k.shape, cap = kBuf.shape[1], Dv = v.shape[3], R = cos.shape[2];
  // (Plain comparisons: this runs for every layer of every decode step.)
  const vs = v.shape, ks = kBuf.shape, vbs = vBuf.shape;
  const fits = q.ndim === 4 && k.ndim === 4 && v.ndim === 4 && q.shape[0] === B && q.shape[1] === L && q.shape[3] === D
    && vs[0] === B && vs[1] === L && vs[2] === Hkv && kBuf.ndim === 4 && ks[0] === B && ks[2] === Hkv && ks[3] === D
    && vBuf.ndim === 4 && vbs[0] === B && vbs[1] === cap && vbs[2] === Hkv && vbs[3] === Dv
    && kBuf.dtype === vBuf.dtype && isFloating(kBuf.dtype) && kBuf.isContiguous && vBuf.isContiguous && kBuf.offset === 0 && vBuf.offset === 0
    && cos.ndim === 3 && cos.shape[0] === B && cos.shape[1] === L && sameShape(cos.shape, sin.shape) && R % 2 === 0 && R <= D
    && q.dtype === "float32" && k.dtype === "float32" && v.dtype === "float32" && at >= 0 && at + L <= cap && B * L > 0;
  if (!fits || !fusable("rotaryKVWrite", q) || !kernelTakesPools("rotaryKVWrite", q.device.type, kBuf.dtype)) {
    if (qkNorm) return normsFirst(qkNorm);
    const qr = applyRotary(q, cos, sin), kr = applyRotary(k, cos, sin);
    const fitsAt = at >= 0 && at + L <= cap && kBuf.ndim === 4 && vBuf.ndim === 4;
    const [kDst, vDst] = fitsAt ? [kBuf.narrow(1, at, L), vBuf.narrow(1, at, L)] : [null, null];
    if (!kDst || !vDst || !sameShape(kDst.shape, k.shape) || !sameShape(vDst.shape, v.shape)) {
      throw new RangeError(`rotary_cache_write: k [${k.shape}] / v [${v.shape}] do not fit positions [${at}, ${at + L}) of the buffers [${kBuf.shape}] / [${vBuf.shape}]`);
    }
    copyInto(kr, kDst);
    copyInto(v, vDst);
    return qr;
  }
  const slots = new Int32Array(B * L);
  for (let b = 0; b < B; b++) for (let t = 0; t < L; t++) slots[b * L + t] = b * cap + at + t;
  const slotTensor = new Tensor(q.device.upload(new Uint8Array(slots.buffer)), "int32", [B * L]);
  const qOut = empty(q.shape, "float32", q.device);
  const f = (t: Tensor) => (t.dtype === "float32" ? t : t.to("float32")).contiguous();
  const vRows = v.reshape(B * L, Hkv, Dv).contiguous();
  if (qkNorm) {
    getKernel("normRotaryKVWrite", q.device.type)(q.contiguous(), qOut, k.contiguous(), vRows, f(cos), f(sin), kBuf, vBuf, slotTensor,
      { q: qkNorm.q.contiguous(), k: qkNorm.k.contiguous(), eps: qkNorm.eps, offset: qkNorm.offset });
  } else {
    getKernel("rotaryKVWrite", q.device.type)(q.contiguous(), qOut, k.contiguous(), vRows, f(cos), f(sin), kBuf, vBuf, slotTensor);
  }
  return qOut;
}
