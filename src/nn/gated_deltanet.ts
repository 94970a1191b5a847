/**
 * The pieces of Gated DeltaNet linear attention (Qwen3.5, Qwen3-Next), mirroring the torch
 * fallbacks in transformers' modeling_qwen3_5.py: the causal depthwise conv1d with its carried
 * state (causal_conv1d_fn / causal_conv1d_update), l2norm, the gated delta rule recurrence
 * (torch_recurrent_gated_delta_rule) and the SiLU-gated RMSNorm (Qwen3_5RMSNormGated).
 *
 * The recurrence is one fused device op (a scan per batch and head with the state in cache), in
 * prefill and decode alike: transformers' prefill uses the chunked form (chunk_gated_delta_rule),
 * which is the same sum in another order, so results agree to float32 rounding; memory does not
 * grow with the prompt beyond the layer's inputs and output.
 */
import { add, gatedDeltaRule as gatedDeltaRuleOp, mul, rmsNorm, rsqrt, silu, sum } from "../tensor/ops.js";
import type { Tensor } from "../tensor/tensor.js";
import { Module, type Parameter } from "./module.js";

/** The causal depthwise conv1d with its carried state is the fused `causalConv1d` op (tensor/ops.ts). */
export { causalConv1d } from "../tensor/ops.js";

/** x * rsqrt(sum(x^2) + eps) over the last dim (transformers' l2norm, as the FLA library). */
export function l2norm(x: Tensor, eps = 1e-6): Tensor {
  return mul(x, rsqrt(add(sum(mul(x, x), -1, true), eps)));
}

/**
 * The gated delta rule over a sequence with q/k l2-normalised and q scaled by Dk^-1/2
 * (use_qk_l2norm_in_kernel). q, k [B, L, H, Dk]; v [B, L, H, Dv]; g (log decay, <= 0) and beta
 * [B, L, H]; state [B, H, Dk, Dv] or null (zeros). Returns out [B, L, H, Dv] float32 and the final
 * state; the scan itself is the fused `gatedDeltaRule` op (tensor/ops.ts).
 */
export function gatedDeltaRule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor | null): { out: Tensor; state: Tensor } {
  const Dk = k.shape[3];
  return gatedDeltaRuleOp(mul(l2norm(q), Dk ** -0.5), l2norm(k), v, g, beta, state);
}

/** RMSNorm followed by a SiLU gate: rmsNorm(x) * weight * silu(z) over the last dim (Qwen3_5RMSNormGated). */
export class RMSNormGated extends Module {
  readonly weight: Parameter;
  constructor(readonly dim: number, readonly eps: number) {
    super();
    this.weight = this.param("weight", [dim]);
  }
  forward(x: Tensor, z: Tensor): Tensor {
    return mul(rmsNorm(x, this.weight.value, this.eps), silu(z));
  }
}
