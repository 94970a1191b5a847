/**
 * The eager fused ops of tensor/fused.ts for block-quantized weights (nn/quantized.ts, as
 * linearQuantized takes them): one call each to the *Quantized fused kernels where the device
 * registers them (linearGroupQuantized, linearAddQuantized: compile's fusions of block-quantized
 * linears, whose products equal linearQuantized's), else the plain ops a quantized decoder layer
 * runs (rmsNorm, linearQuantizedGroup, siluMul, linearQuantized, add), with the same values. Each
 * first checks that its tensors are on one device (checkSameDevice's error). Under a trace
 * (compile/'s capture) always the plain ops.
 */
import { getKernel, hasKernel, type OpName } from "../devices/kernels.js";
import type { RmsNormParams } from "./fused.js";
import { SILU_MUL, siluMul } from "./fused.js";
import { add, checkSameDevice, empty, linearQuantized, linearQuantizedGroup, rmsNorm, type QuantizedLinearWeight } from "./ops.js";
import { numel, sameShape } from "./shape.js";
import type { Tensor } from "./tensor.js";
import { traceObserver } from "./trace.js";

/** A block-quantized weight [N, K]: q int32 [N, K * bits / 32], scales float32 [N, K / 32] (quantizeBlocks' result). */
export interface BlockQuantized {
  readonly q: Tensor;
  readonly scales: Tensor;
  readonly bits: 4 | 8;
}

/** The fused kernels' weight record (contiguous views). */
const kernelWeight = (w: BlockQuantized) => ({ q: w.q.contiguous(), scales: w.scales.contiguous(), bits: w.bits });

/** Kernel `op` (named by string: devices that have it register it) may run on x's device, and x is float32 [..., K] fitting every weight. */
function fusable(op: string, x: Tensor, ws: readonly BlockQuantized[]): boolean {
  const K = x.shape[x.ndim - 1];
  return traceObserver() === null && hasKernel(op as OpName, x.device.type) && x.dtype === "float32" && numel(x.shape) > 0 && K % 32 === 0
    && ws.every((w) => w.bits === ws[0].bits && w.q.dtype === "int32" && w.scales.dtype === "float32"
      && sameShape(w.q.shape, [w.q.shape[0], (K * w.bits) / 32]) && sameShape(w.scales.shape, [w.q.shape[0], K / 32]));
}

/** The tensors of block-quantized weights (for checkSameDevice). */
function parts(...ws: BlockQuantized[]): Tensor[] {
  const out: Tensor[] = [];
  for (const w of ws) out.push(w.q, w.scales);
  return out;
}

const normed = (x: Tensor, norm: RmsNormParams | null) => (norm ? rmsNorm(x, norm.weight, norm.eps, norm.offset) : x);
const groupNorm = (norm: RmsNormParams | null) => norm && { weight: norm.weight.contiguous(), eps: norm.eps, offset: norm.offset };

/**
 * linearQuantized(rmsNorm(x, norm), w) for each of `ws` (1-3 weights of one bit width, no bias;
 * norm null: x itself): float32 [..., N_i] each. One linearGroupQuantized call where the device has
 * it, else rmsNorm then linearQuantizedGroup. Errors as linearQuantized's.
 */
export function normLinearsQuantized(x: Tensor, norm: RmsNormParams | null, ws: readonly BlockQuantized[]): Tensor[] {
  checkSameDevice("norm_linears_quantized", x, norm?.weight, ...parts(...ws));
  if (ws.length < 1 || ws.length > 3 || !fusable("linearGroupQuantized", x, ws)) {
    return linearQuantizedGroup(normed(x, norm), ws.map((w): QuantizedLinearWeight => ({ ...w, bias: null })));
  }
  const K = x.shape[x.ndim - 1], M = numel(x.shape.slice(0, -1));
  const outs = ws.map((w) => empty([...x.shape.slice(0, -1), w.q.shape[0]], "float32", x.device));
  (getKernel("linearGroupQuantized" as OpName, x.device.type) as unknown as Function)(x.reshape(M, K).contiguous(), groupNorm(norm),
    ws.map(kernelWeight), outs.map((o) => o.view(M, o.shape[o.ndim - 1])), null);
  return outs;
}

/**
 * residual + linearQuantized(x, w, bias): x float32 [..., K], residual float32 [..., N]. One
 * linearAddQuantized call where the device has it, else linearQuantized then add.
 */
export function linearResidualQuantized(x: Tensor, w: BlockQuantized, bias: Tensor | null, residual: Tensor): Tensor {
  checkSameDevice("linear_residual_quantized", x, ...parts(w), bias, residual);
  const M = numel(x.shape.slice(0, -1)), N = w.q.shape[0];
  const fits = residual.dtype === "float32" && sameShape(residual.shape, [...x.shape.slice(0, -1), N]) && (!bias || (bias.ndim === 1 && bias.shape[0] === N));
  if (!fits || !fusable("linearAddQuantized", x, [w])) return add(residual, linearQuantized(x, w.q, w.scales, w.bits, bias));
  const out = empty(residual.shape, "float32", x.device);
  (getKernel("linearAddQuantized" as OpName, x.device.type) as unknown as Function)(x.reshape(M, x.shape[x.ndim - 1]).contiguous(), kernelWeight(w),
    bias?.contiguous() ?? null, residual.reshape(M, N).contiguous(), out.view(M, N));
  return out;
}

/**
 * tensor/fused.ts gatedMlpResidual with block-quantized gate/up (one bit width, no bias) and down:
 * residual + down(silu(gate n) * (up n)) + downBias, n = rmsNorm(x, norm). Float32 [..., N]. Two
 * calls (linearGroupQuantized with the SiLU * up epilogue, then linearAddQuantized) where the device
 * has them, else rmsNorm, linearQuantizedGroup, siluMul, linearQuantized and add.
 */
export function gatedMlpResidualQuantized(x: Tensor, norm: RmsNormParams | null, gate: BlockQuantized, up: BlockQuantized, down: BlockQuantized,
                                          downBias: Tensor | null, residual: Tensor): Tensor {
  checkSameDevice("gated_mlp_residual_quantized", x, norm?.weight, ...parts(gate, up, down), downBias, residual);
  const M = numel(x.shape.slice(0, -1)), I = gate.q.shape[0], N = down.q.shape[0];
  const fits = up.q.shape[0] === I && residual.dtype === "float32" && sameShape(residual.shape, [...x.shape.slice(0, -1), N])
    && down.q.shape[1] === (I * down.bits) / 32 && I % 32 === 0 && (!downBias || (downBias.ndim === 1 && downBias.shape[0] === N));
  if (!fits || !fusable("linearGroupQuantized", x, [gate, up]) || !hasKernel("linearAddQuantized" as OpName, x.device.type)) {
    const [g, u] = linearQuantizedGroup(normed(x, norm), [gate, up].map((w): QuantizedLinearWeight => ({ ...w, bias: null })));
    return add(residual, linearQuantized(siluMul(g, u), down.q, down.scales, down.bits, downBias));
  }
  const K = x.shape[x.ndim - 1];
  const h = empty([M, I], "float32", x.device), out = empty(residual.shape, "float32", x.device);
  (getKernel("linearGroupQuantized" as OpName, x.device.type) as unknown as Function)(x.reshape(M, K).contiguous(), groupNorm(norm),
    [gate, up].map(kernelWeight), [h], SILU_MUL);
  (getKernel("linearAddQuantized" as OpName, x.device.type) as unknown as Function)(h, kernelWeight(down), downBias?.contiguous() ?? null,
    residual.reshape(M, N).contiguous(), out.view(M, N));
  return out;
}
