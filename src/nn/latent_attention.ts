/**
 * Multi-head latent attention (MLA) of DeepSeek-V2/V3 (transformers' DeepseekV3Attention,
 * models/deepseek_v3/modeling_deepseek_v3.py).
 *
 *   q   = q_b_proj(q_a_layernorm(q_a_proj(x)))   (or q_proj(x) without q_lora_rank), per head
 *         dn no-rope dims then dr rope dims;
 *   kv_a_proj_with_mqa(x) = [c (kv_lora_rank r), k_rot (dr, one rope key shared by every head)];
 *   c   = kv_a_layernorm(c); kv_b_proj(c) = per head [k_nope (dn), v (dv)].
 *
 * The KV cache holds only the compressed latent: c as its "keys" [B, 1, Lk, r] and the roped k_rot
 * as its "values" [B, 1, Lk, dr] (as transformers' cache does). Attention runs in the latent space
 * with kv_b_proj absorbed (DeepSeek-V2's inference form, the same function up to rounding): each
 * head's query becomes [q_nope W_uk_h, q_rot] against keys [c, k_rot] (one shared kv head), the
 * softmax-weighted sum of c is mapped up by W_uv_h, then o_proj.
 * With `interleave` (rope_interleave) the rope dims are rotated in adjacent pairs (0,1),(2,3)…, done
 * here by reordering them evens-then-odds before the usual half rotation, which is what transformers'
 * apply_rotary_pos_emb_interleave outputs.
 */
import type { AttentionKVCache } from "./kv_cache.js";
import { applyRotary, cat, matmul, scaledDotProductAttention } from "../tensor/ops.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { Linear, RMSNorm } from "./layers.js";
import { Module } from "./module.js";

export interface LatentAttentionOptions {
  hiddenSize: number;
  numHeads: number;
  /** q_lora_rank; null = a plain q_proj. */
  qLoraRank: number | null;
  kvLoraRank: number;
  qkNopeHeadDim: number;
  qkRopeHeadDim: number;
  vHeadDim: number;
  /** Bias on q_a_proj, kv_a_proj_with_mqa and o_proj (attention_bias). */
  bias: boolean;
  /** Softmax scale (DeepSeek: qk_head_dim^-0.5 times the yarn mscale squared). */
  scale: number;
  /** rope_interleave: rotate adjacent pairs of the rope dims. */
  interleave: boolean;
}

/** MLA with its checkpoint's parameter names. forward: x [B, L, hidden] -> [B, L, hidden]. */
export class MultiHeadLatentAttention extends Module {
  readonly q_proj: Linear | null;
  readonly q_a_proj: Linear | null;
  readonly q_a_layernorm: RMSNorm | null;
  readonly q_b_proj: Linear | null;
  readonly kv_a_proj_with_mqa: Linear;
  readonly kv_a_layernorm: RMSNorm;
  readonly kv_b_proj: Linear;
  readonly o_proj: Linear;

  constructor(private readonly o: LatentAttentionOptions) {
    super();
    const { hiddenSize: h, numHeads: H, qLoraRank: qr, kvLoraRank: r } = o;
    const dq = o.qkNopeHeadDim + o.qkRopeHeadDim;
    // DeepseekV3RMSNorm's default eps (1e-6) for the two low-rank norms, whatever rms_norm_eps says.
    this.q_proj = qr === null ? this.module("q_proj", new Linear(h, H * dq, false)) : null;
    this.q_a_proj = qr === null ? null : this.module("q_a_proj", new Linear(h, qr, o.bias));
    this.q_a_layernorm = qr === null ? null : this.module("q_a_layernorm", new RMSNorm(qr, 1e-6));
    this.q_b_proj = qr === null ? null : this.module("q_b_proj", new Linear(qr, H * dq, false));
    this.kv_a_proj_with_mqa = this.module("kv_a_proj_with_mqa", new Linear(h, r + o.qkRopeHeadDim, o.bias));
    this.kv_a_layernorm = this.module("kv_a_layernorm", new RMSNorm(r, 1e-6));
    this.kv_b_proj = this.module("kv_b_proj", new Linear(r, H * (o.qkNopeHeadDim + o.vHeadDim), false));
    this.o_proj = this.module("o_proj", new Linear(H * o.vHeadDim, h, o.bias));
  }

  /** cos/sin [B, L, dr] rotary tables; mask: additive padding mask [B, 1, 1, past + L] or null. */
  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: AttentionKVCache | null): Tensor {
    return tidy(() => this.attend(x, cos, sin, mask, cache));
  }

  private attend(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: AttentionKVCache | null): Tensor {
    const [B, L] = x.shape;
    const { numHeads: H, kvLoraRank: r, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv } = this.o;
    const q = (this.q_proj ? this.q_proj.forward(x) : this.q_b_proj!.forward(this.q_a_layernorm!.forward(this.q_a_proj!.forward(x)))).view(B, L, H, dn + dr);
    const compressed = this.kv_a_proj_with_mqa.forward(x);
    const c = this.kv_a_layernorm.forward(compressed.narrow(2, 0, r)).view(B, L, 1, r);
    const qRot = applyRotary(this.ropeOrder(q.narrow(3, dn, dr)), cos, sin);
    const kRot = applyRotary(this.ropeOrder(compressed.narrow(2, r, dr).view(B, L, 1, dr)), cos, sin);
    const latent = cache ? cache.update(c, kRot) : { keys: c.transpose(1, 2), values: kRot.transpose(1, 2) };
    const keys = cat([latent.keys, latent.values], 3); // [B, 1, Lk, r + dr]
    // kv_b_proj per head: rows [h*(dn+dv), +dn) map c to k_nope (W_uk), the next dv rows to v (W_uv).
    const wkv = this.kv_b_proj.weight.value.view(H, dn + dv, r);
    const heads = (t: Tensor, d: number) => t.permute(2, 0, 1, 3).reshape(H, B * L, d); // [B, L, H, d] -> [H, B*L, d]
    const qLatent = matmul(heads(q.narrow(3, 0, dn), dn), wkv.narrow(1, 0, dn)); // [H, B*L, r]
    const query = cat([qLatent, heads(qRot, dr)], 2).view(H, B, L, r + dr).permute(1, 0, 2, 3);
    const out = scaledDotProductAttention(query, keys, keys.narrow(3, 0, r), { mask, scale: this.o.scale, isCausal: true });
    const v = matmul(out.permute(1, 0, 2, 3).reshape(H, B * L, r), wkv.narrow(1, dn, dv).transpose(1, 2)); // [H, B*L, dv]
    return this.o_proj.forward(v.permute(1, 0, 2).reshape(B, L, H * dv));
  }

  /** The rope dims [.., dr] in the order the half rotation needs (evens then odds when interleaved). */
  private ropeOrder(t: Tensor): Tensor {
    if (!this.o.interleave) return t;
    const shape = t.shape, dr = shape[3];
    return t.reshape(shape[0], shape[1], shape[2], dr / 2, 2).transpose(3, 4).reshape(shape[0], shape[1], shape[2], dr);
  }
}
