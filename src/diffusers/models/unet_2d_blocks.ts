/**
 * The down, mid and up blocks of diffusers' models/unets/unet_2d_blocks.py that SD 1.x/2.x and the
 * VAE use: CrossAttnDownBlock2D, DownBlock2D, UNetMidBlock2DCrossAttn, UpBlock2D,
 * CrossAttnUpBlock2D (UNet) and DownEncoderBlock2D, UNetMidBlock2D, UpDecoderBlock2D (VAE).
 * Each sub-layer runs in a tidy scope, so only the tensors a block hands on stay allocated.
 */
import { Module, ModuleList } from "../../nn/index.js";
import { cat, tidy } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";
import { Attention } from "./attention.js";
import { Downsample2D, ResnetBlock2D, Upsample2D } from "./resnet.js";
import { Transformer2DModel } from "./transformer_2d.js";

/** What every UNet block gets from the model config. */
export interface BlockOptions {
  numLayers: number;
  inChannels: number;
  outChannels: number;
  tembChannels: number | null;
  eps: number;
  groups: number;
  act: string;
  /** Cross-attention blocks only. */
  heads?: number;
  crossAttentionDim?: number;
  transformerLayers?: number;
  useLinearProjection?: boolean;
  onlyCrossAttention?: boolean;
}

const resnet = (o: BlockOptions, inC: number, outC: number, scale = 1) =>
  new ResnetBlock2D({ inChannels: inC, outChannels: outC, tembChannels: o.tembChannels, groups: o.groups, eps: o.eps, act: o.act, outputScaleFactor: scale });

const transformer = (o: BlockOptions, channels: number) => new Transformer2DModel({
  heads: o.heads!, dimHead: Math.floor(channels / o.heads!), inChannels: channels, numLayers: o.transformerLayers ?? 1,
  crossAttentionDim: o.crossAttentionDim!, groups: o.groups, useLinearProjection: o.useLinearProjection ?? false, onlyCrossAttention: o.onlyCrossAttention ?? false,
});

/** A down block: forward -> the output and every state the up path takes as a skip connection. */
export interface DownBlock extends Module {
  readonly resnets: ModuleList<ResnetBlock2D>;
  forward(x: Tensor, temb: Tensor | null, context: Tensor | null): { out: Tensor; states: Tensor[] };
}

/** An up block: consumes as many skip states as it has resnets (last first). */
export interface UpBlock extends Module {
  readonly resnets: ModuleList<ResnetBlock2D>;
  forward(x: Tensor, skips: Tensor[], temb: Tensor | null, context: Tensor | null, upsampleSize?: [number, number]): Tensor;
}

/** CrossAttnDownBlock2D / DownBlock2D (attention when `o.heads` is set); downsamplers.0 unless last. */
export class DownBlock2D extends Module implements DownBlock {
  readonly resnets: ModuleList<ResnetBlock2D>;
  readonly attentions: ModuleList<Transformer2DModel> | null;
  readonly downsamplers: ModuleList<Downsample2D> | null;
  constructor(o: BlockOptions, crossAttention: boolean, addDownsample: boolean, downsamplePadding: number) {
    super();
    const n = o.numLayers;
    this.resnets = this.module("resnets", new ModuleList(Array.from({ length: n }, (_, i) => resnet(o, i === 0 ? o.inChannels : o.outChannels, o.outChannels))));
    this.attentions = crossAttention ? this.module("attentions", new ModuleList(Array.from({ length: n }, () => transformer(o, o.outChannels)))) : null;
    this.downsamplers = addDownsample ? this.module("downsamplers", new ModuleList([new Downsample2D(o.outChannels, o.outChannels, downsamplePadding)])) : null;
  }
  forward(x: Tensor, temb: Tensor | null, context: Tensor | null): { out: Tensor; states: Tensor[] } {
    const states: Tensor[] = [];
    let h = x;
    this.resnets.items.forEach((r, i) => {
      const input = h;
      h = tidy(() => {
        const y = r.forward(input, temb);
        return this.attentions ? this.attentions.items[i].forward(y, context!) : y;
      });
      states.push(h);
    });
    if (this.downsamplers) {
      const input = h;
      h = tidy(() => this.downsamplers!.items[0].forward(input));
      states.push(h);
    }
    return { out: h, states };
  }
}

/** CrossAttnUpBlock2D / UpBlock2D: per resnet, cat the last skip on channels; upsamplers.0 unless last. */
export class UpBlock2D extends Module implements UpBlock {
  readonly resnets: ModuleList<ResnetBlock2D>;
  readonly attentions: ModuleList<Transformer2DModel> | null;
  readonly upsamplers: ModuleList<Upsample2D> | null;
  /** `prevOutputChannels`: channels coming up from below; `o.inChannels`: channels of the deepest skip. */
  constructor(o: BlockOptions, prevOutputChannels: number, crossAttention: boolean, addUpsample: boolean) {
    super();
    const n = o.numLayers;
    this.resnets = this.module("resnets", new ModuleList(Array.from({ length: n }, (_, i) => {
      const skip = i === n - 1 ? o.inChannels : o.outChannels;
      return resnet(o, (i === 0 ? prevOutputChannels : o.outChannels) + skip, o.outChannels);
    })));
    this.attentions = crossAttention ? this.module("attentions", new ModuleList(Array.from({ length: n }, () => transformer(o, o.outChannels)))) : null;
    this.upsamplers = addUpsample ? this.module("upsamplers", new ModuleList([new Upsample2D(o.outChannels, o.outChannels)])) : null;
  }
  forward(x: Tensor, skips: Tensor[], temb: Tensor | null, context: Tensor | null, upsampleSize?: [number, number]): Tensor {
    let h = x;
    const rest = [...skips];
    this.resnets.items.forEach((r, i) => {
      const input = h, skip = rest.pop()!;
      h = tidy(() => {
        const y = r.forward(cat([input, skip], 1), temb);
        return this.attentions ? this.attentions.items[i].forward(y, context!) : y;
      });
    });
    if (this.upsamplers) {
      const input = h;
      h = tidy(() => this.upsamplers!.items[0].forward(input, upsampleSize));
    }
    return h;
  }
}

/**
 * UNetMidBlock2DCrossAttn (cross-attention transformers) or UNetMidBlock2D (the VAE's: one
 * self-attention with a GroupNorm and residual, heads of attentionHeadDim channels, or none):
 * resnets.0, then per layer attentions.i and resnets.(i+1).
 */
export class MidBlock2D extends Module {
  readonly attentions: ModuleList<Transformer2DModel | Attention>;
  readonly resnets: ModuleList<ResnetBlock2D>;
  constructor(o: BlockOptions, kind: "cross" | "self" | "none", outputScaleFactor = 1, attentionHeadDim = o.inChannels) {
    super();
    const C = o.inChannels, n = o.numLayers;
    const attns = kind === "none" ? [] : Array.from({ length: n }, () => kind === "cross" ? transformer(o, C) : new Attention({
      queryDim: C, crossAttentionDim: null, heads: C / attentionHeadDim, dimHead: attentionHeadDim, bias: true,
      normNumGroups: o.groups, eps: o.eps, residualConnection: true, rescaleOutputFactor: outputScaleFactor,
    }));
    this.attentions = this.module("attentions", new ModuleList<Transformer2DModel | Attention>(attns));
    this.resnets = this.module("resnets", new ModuleList(Array.from({ length: n + 1 }, () => resnet(o, C, C, outputScaleFactor))));
  }
  forward(x: Tensor, temb: Tensor | null, context: Tensor | null): Tensor {
    let h = tidy(() => this.resnets.items[0].forward(x, temb));
    this.resnets.items.slice(1).forEach((r, i) => {
      const input = h;
      h = tidy(() => {
        const a = this.attentions.items[i];
        const y = a ? (a instanceof Transformer2DModel ? a.forward(input, context!) : a.forward(input)) : input;
        return r.forward(y, temb);
      });
    });
    return h;
  }
}
