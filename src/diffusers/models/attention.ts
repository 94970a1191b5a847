/**
 * Attention blocks of diffusers' models/attention_processor.py (Attention + AttnProcessor2_0) and
 * models/attention.py (BasicTransformerBlock, FeedForward, GEGLU), with the checkpoints' names
 * (to_q, to_k, to_v, to_out.0; ff.net.0.proj, ff.net.2; norm1-3, attn1 self, attn2 cross).
 */
import { GroupNorm, LayerNorm, Linear, Module, ModuleList } from "../../nn/index.js";
import { add, gelu, mul, scaledDotProductAttention } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";

export interface AttentionOptions {
  queryDim: number;
  /** Key/value input size (cross-attention), or null for self-attention. */
  crossAttentionDim: number | null;
  heads: number;
  dimHead: number;
  /** Bias of to_q/to_k/to_v (the UNet: false; the VAE: true). */
  bias: boolean;
  /** A GroupNorm over channels before the projections (the VAE's mid-block attention). */
  normNumGroups?: number;
  eps?: number;
  /** Add the input to the output (the VAE), then divide by rescaleOutputFactor. */
  residualConnection?: boolean;
  rescaleOutputFactor?: number;
}

/** Multi-head attention on [B, L, C] or [B, C, H, W] (flattened to [B, HW, C] and back). */
export class Attention extends Module {
  readonly group_norm: GroupNorm | null;
  readonly to_q: Linear;
  readonly to_k: Linear;
  readonly to_v: Linear;
  readonly to_out: ModuleList<Module>;
  private readonly outProj: Linear;

  constructor(private readonly o: AttentionOptions) {
    super();
    const inner = o.heads * o.dimHead;
    const kv = o.crossAttentionDim ?? o.queryDim;
    this.group_norm = o.normNumGroups ? this.module("group_norm", new GroupNorm(o.normNumGroups, o.queryDim, o.eps ?? 1e-5)) : null;
    this.to_q = this.module("to_q", new Linear(o.queryDim, inner, o.bias));
    this.to_k = this.module("to_k", new Linear(kv, inner, o.bias));
    this.to_v = this.module("to_v", new Linear(kv, inner, o.bias));
    this.outProj = new Linear(inner, o.queryDim, true);
    this.to_out = this.module("to_out", new ModuleList<Module>([this.outProj, new Module()]));
  }

  /** x [B, L, C] (or [B, C, H, W]), context [B, Lk, crossDim] or null (self-attention) -> x's shape. */
  forward(x: Tensor, context: Tensor | null = null): Tensor {
    const spatial = x.ndim === 4;
    const [B, C] = x.shape;
    let h = spatial ? x.view(B, C, -1).transpose(1, 2) : x;
    if (this.group_norm) h = this.group_norm.forward(h.transpose(1, 2)).transpose(1, 2);
    const kvIn = context ?? h;
    const L = h.shape[1], Lk = kvIn.shape[1], H = this.o.heads, D = this.o.dimHead;
    const q = this.to_q.forward(h).view(B, L, H, D).transpose(1, 2);
    const k = this.to_k.forward(kvIn).view(B, Lk, H, D).transpose(1, 2);
    const v = this.to_v.forward(kvIn).view(B, Lk, H, D).transpose(1, 2);
    const o = scaledDotProductAttention(q, k, v).transpose(1, 2).reshape(B, L, H * D);
    let out = this.outProj.forward(o);
    if (spatial) out = out.transpose(1, 2).reshape([...x.shape]);
    if (this.o.residualConnection) out = add(out, x);
    const r = this.o.rescaleOutputFactor ?? 1;
    return r === 1 ? out : out.div(r);
  }
}

/** GEGLU: proj to 2·inner, then hidden · gelu(gate) (exact gelu). */
class GEGLU extends Module {
  readonly proj: Linear;
  constructor(dim: number, inner: number) {
    super();
    this.proj = this.module("proj", new Linear(dim, inner * 2));
  }
  forward(x: Tensor): Tensor {
    const [hidden, gate] = this.proj.forward(x).chunk(2, -1);
    return mul(hidden, gelu(gate));
  }
}

/** FeedForward with GEGLU (SD's activation_fn "geglu", mult 4): net.0 = GEGLU, net.1 = dropout, net.2 = Linear. */
export class FeedForward extends Module {
  readonly net: ModuleList<Module>;
  private readonly geglu: GEGLU;
  private readonly out: Linear;
  constructor(dim: number, activationFn: string) {
    super();
    if (activationFn !== "geglu") throw new Error(`FeedForward: activation_fn '${activationFn}' is not supported; supported: geglu`);
    this.geglu = new GEGLU(dim, dim * 4);
    this.out = new Linear(dim * 4, dim);
    this.net = this.module("net", new ModuleList<Module>([this.geglu, new Module(), this.out]));
  }
  forward(x: Tensor): Tensor {
    return this.out.forward(this.geglu.forward(x));
  }
}

/** BasicTransformerBlock (norm_type "layer_norm"): self-attention, cross-attention, GEGLU feed-forward, each pre-norm with a residual. */
export class BasicTransformerBlock extends Module {
  readonly norm1: LayerNorm;
  readonly attn1: Attention;
  readonly norm2: LayerNorm;
  readonly attn2: Attention;
  readonly norm3: LayerNorm;
  readonly ff: FeedForward;
  constructor(dim: number, heads: number, dimHead: number, crossAttentionDim: number, private readonly onlyCrossAttention = false) {
    super();
    this.norm1 = this.module("norm1", new LayerNorm(dim, 1e-5));
    this.attn1 = this.module("attn1", new Attention({ queryDim: dim, crossAttentionDim: onlyCrossAttention ? crossAttentionDim : null, heads, dimHead, bias: false }));
    this.norm2 = this.module("norm2", new LayerNorm(dim, 1e-5));
    this.attn2 = this.module("attn2", new Attention({ queryDim: dim, crossAttentionDim, heads, dimHead, bias: false }));
    this.norm3 = this.module("norm3", new LayerNorm(dim, 1e-5));
    this.ff = this.module("ff", new FeedForward(dim, "geglu"));
  }
  /** x [B, L, dim], context [B, Lk, crossDim] -> [B, L, dim]. */
  forward(x: Tensor, context: Tensor): Tensor {
    let h = add(this.attn1.forward(this.norm1.forward(x), this.onlyCrossAttention ? context : null), x);
    h = add(this.attn2.forward(this.norm2.forward(h), context), h);
    return add(this.ff.forward(this.norm3.forward(h)), h);
  }
}
