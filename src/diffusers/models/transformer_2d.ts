/**
 * Transformer2DModel for continuous inputs (diffusers' models/transformers/transformer_2d.py, the
 * spatial transformer of SD's UNet): GroupNorm (eps 1e-6) → proj_in (1×1 conv, or Linear with
 * use_linear_projection, SD 2.x) → BasicTransformerBlocks over the H·W tokens → proj_out → + input.
 */
import { Conv2d, GroupNorm, Linear, Module, ModuleList } from "../../nn/index.js";
import { add } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";
import { BasicTransformerBlock } from "./attention.js";

export interface Transformer2DOptions {
  heads: number;
  dimHead: number;
  inChannels: number;
  numLayers: number;
  crossAttentionDim: number;
  groups: number;
  useLinearProjection: boolean;
  onlyCrossAttention: boolean;
}

export class Transformer2DModel extends Module {
  readonly norm: GroupNorm;
  readonly proj_in: Conv2d | Linear;
  readonly transformer_blocks: ModuleList<BasicTransformerBlock>;
  readonly proj_out: Conv2d | Linear;
  private readonly linear: boolean;

  constructor(o: Transformer2DOptions) {
    super();
    const inner = o.heads * o.dimHead;
    this.linear = o.useLinearProjection;
    this.norm = this.module("norm", new GroupNorm(o.groups, o.inChannels, 1e-6));
    this.proj_in = this.module("proj_in", this.linear ? new Linear(o.inChannels, inner) : new Conv2d(o.inChannels, inner, 1));
    this.transformer_blocks = this.module("transformer_blocks", new ModuleList(Array.from({ length: o.numLayers },
      () => new BasicTransformerBlock(inner, o.heads, o.dimHead, o.crossAttentionDim, o.onlyCrossAttention))));
    this.proj_out = this.module("proj_out", this.linear ? new Linear(inner, o.inChannels) : new Conv2d(inner, o.inChannels, 1));
  }

  /** x [B, C, H, W], context [B, Lk, crossDim] -> [B, C, H, W]. */
  forward(x: Tensor, context: Tensor): Tensor {
    const [B, C, H, W] = x.shape;
    const normed = this.norm.forward(x);
    let h: Tensor;
    if (this.linear) h = this.proj_in.forward(normed.permute(0, 2, 3, 1).reshape(B, H * W, C));
    else {
      const p = this.proj_in.forward(normed);
      h = p.permute(0, 2, 3, 1).reshape(B, H * W, p.shape[1]);
    }
    for (const block of this.transformer_blocks.items) h = block.forward(h, context);
    const inner = h.shape[2];
    let out: Tensor;
    if (this.linear) out = this.proj_out.forward(h).reshape(B, H, W, C).permute(0, 3, 1, 2);
    else out = this.proj_out.forward(h.reshape(B, H, W, inner).permute(0, 3, 1, 2).contiguous());
    return add(out, x);
  }
}
