/**
 * The pieces of Gated DeltaNet linear attention (Qwen3.5, Qwen3-Next), mirroring the torch
 * fallbacks in transformers' modeling_qwen3_5.py: the causal depthwise conv1d with its carried
 * state (causal_conv1d_fn / causal_conv1d_update), l2norm, the gated delta rule recurrence
 * (torch_recurrent_gated_delta_rule) and the SiLU-gated RMSNorm (Qwen3_5RMSNormGated).
 *
 * All are compositions of existing ops. The recurrence runs one token at a time, also in prefill
 * (transformers' prefill uses the chunked form, which is the same sum in another order; results
 * agree to float32 rounding): exact, but a long prompt costs ~7 small ops per token per layer.
 */
import { zeros } from "../tensor/creation.js";
import { add, cat, copyTo, exp, matmul, mul, rmsNorm, rsqrt, silu, sub, sum } from "../tensor/ops.js";
import type { Tensor } from "../tensor/tensor.js";
import { Module, type Parameter } from "./module.js";

/**
 * Causal depthwise conv1d over time, no bias (nn.Conv1d with groups = channels and left padding
 * kernel - 1): x [B, L, C], weight [C, 1, K], state [B, K - 1, C] (the inputs before x; null =
 * zeros) -> out [B, L, C] float32 and the new state (the last K - 1 inputs).
 * out[b, t, c] = sum_i weight[c, 0, i] * [state; x][b, t + i, c].
 */
export function causalConv1d(x: Tensor, weight: Tensor, state: Tensor | null): { out: Tensor; state: Tensor } {
  const [B, L, C] = x.shape, K = weight.shape[2];
  const past = state ?? zeros([B, K - 1, C], { device: x.device });
  const padded = cat([past, x], 1);
  const w = weight.view(C, K);
  let out = mul(padded.narrow(1, 0, L), w.select(1, 0));
  for (let i = 1; i < K; i++) out = add(out, mul(padded.narrow(1, i, L), w.select(1, i)));
  // A copy, so the state does not keep the whole padded input alive.
  return { out, state: copyTo(padded.narrow(1, L, K - 1), "float32", x.device) };
}

/** x * rsqrt(sum(x^2) + eps) over the last dim (transformers' l2norm, as the FLA library). */
export function l2norm(x: Tensor, eps = 1e-6): Tensor {
  return mul(x, rsqrt(add(sum(mul(x, x), -1, true), eps)));
}

/**
 * The gated delta rule over a sequence, token by token, with q/k l2-normalised and q scaled by
 * Dk^-1/2 (use_qk_l2norm_in_kernel). q, k [B, L, H, Dk]; v [B, L, H, Dv]; g (log decay, <= 0) and
 * beta [B, L, H]; state [B, H, Dk, Dv] or null (zeros). Per token t:
 *   S = S * exp(g_t);  S = S + k_t (beta_t (v_t - k_t^T S))^T;  o_t = q_t^T S.
 * Returns out [B, L, H, Dv] float32 and the final state.
 */
export function gatedDeltaRule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor | null): { out: Tensor; state: Tensor } {
  const [B, L, H, Dk] = k.shape, Dv = v.shape[3];
  const heads = (x: Tensor) => x.transpose(1, 2); // [B, H, L, ...]
  const qh = heads(mul(l2norm(q), Dk ** -0.5)), kh = heads(l2norm(k)), vh = heads(v);
  const decay = heads(exp(g)), bh = heads(beta);
  let S = state ?? zeros([B, H, Dk, Dv], { device: q.device });
  const outs: Tensor[] = [];
  for (let t = 0; t < L; t++) {
    const kt = kh.select(2, t); // [B, H, Dk]
    S = mul(S, decay.select(2, t).unsqueeze(2).unsqueeze(3));
    const kvMem = matmul(kt.unsqueeze(2), S); // [B, H, 1, Dv]
    const delta = mul(sub(vh.select(2, t).unsqueeze(2), kvMem), bh.select(2, t).unsqueeze(2).unsqueeze(3));
    S = add(S, mul(kt.unsqueeze(3), delta));
    outs.push(matmul(qh.select(2, t).unsqueeze(2), S));
  }
  return { out: cat(outs, 2).transpose(1, 2), state: S };
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
