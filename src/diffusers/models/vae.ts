/**
 * The VAE's Encoder and Decoder (diffusers' models/autoencoders/vae.py): conv_in → down/up blocks
 * → UNetMidBlock2D (a self-attention between two resnets) → GroupNorm → SiLU → conv_out. Resnets
 * have no time embedding and eps 1e-6.
 */
import { activation, type Activation } from "../../nn/activations.js";
import { Conv2d, GroupNorm, Module, ModuleList } from "../../nn/index.js";
import { tidy } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";
import { ResnetBlock2D, Upsample2D } from "./resnet.js";
import { DownBlock2D, MidBlock2D, type BlockOptions } from "./unet_2d_blocks.js";

export interface CoderOptions {
  inChannels: number;
  outChannels: number;
  blockOutChannels: number[];
  layersPerBlock: number;
  groups: number;
  act: string;
  midBlockAddAttention: boolean;
}

const EPS = 1e-6;
const opts = (o: CoderOptions, inC: number, outC: number, numLayers: number): BlockOptions =>
  ({ numLayers, inChannels: inC, outChannels: outC, tembChannels: null, eps: EPS, groups: o.groups, act: o.act });

/** UpDecoderBlock2D: resnets (no skips), then upsamplers.0 unless last. */
class UpDecoderBlock2D extends Module {
  readonly resnets: ModuleList<ResnetBlock2D>;
  readonly upsamplers: ModuleList<Upsample2D> | null;
  constructor(o: BlockOptions, addUpsample: boolean) {
    super();
    this.resnets = this.module("resnets", new ModuleList(Array.from({ length: o.numLayers }, (_, i) => new ResnetBlock2D({
      inChannels: i === 0 ? o.inChannels : o.outChannels, outChannels: o.outChannels, tembChannels: null, groups: o.groups, eps: o.eps, act: o.act,
    }))));
    this.upsamplers = addUpsample ? this.module("upsamplers", new ModuleList([new Upsample2D(o.outChannels, o.outChannels)])) : null;
  }
  forward(x: Tensor): Tensor {
    let h = x;
    for (const r of this.resnets.items) {
      const input = h;
      h = tidy(() => r.forward(input, null));
    }
    if (this.upsamplers) {
      const input = h;
      h = tidy(() => this.upsamplers!.items[0].forward(input));
    }
    return h;
  }
}

/** Decoder: latents [B, latent, h, w] -> image [B, out, h·2^(n−1), w·2^(n−1)]. */
export class Decoder extends Module {
  readonly conv_in: Conv2d;
  readonly mid_block: MidBlock2D;
  readonly up_blocks: ModuleList<UpDecoderBlock2D>;
  readonly conv_norm_out: GroupNorm;
  readonly conv_out: Conv2d;
  private readonly act: Activation;
  constructor(o: CoderOptions) {
    super();
    const boc = o.blockOutChannels, n = boc.length, rboc = [...boc].reverse();
    this.act = activation(o.act);
    this.conv_in = this.module("conv_in", new Conv2d(o.inChannels, boc[n - 1], 3, { padding: 1 }));
    this.mid_block = this.module("mid_block", new MidBlock2D(opts(o, boc[n - 1], boc[n - 1], 1), o.midBlockAddAttention ? "self" : "none", 1, boc[n - 1]));
    let outC = rboc[0];
    this.up_blocks = this.module("up_blocks", new ModuleList(rboc.map((c, i) => {
      const prev = outC;
      outC = c;
      return new UpDecoderBlock2D(opts(o, prev, outC, o.layersPerBlock + 1), i < n - 1);
    })));
    this.conv_norm_out = this.module("conv_norm_out", new GroupNorm(o.groups, boc[0], EPS));
    this.conv_out = this.module("conv_out", new Conv2d(boc[0], o.outChannels, 3, { padding: 1 }));
  }
  forward(z: Tensor): Tensor {
    let h = tidy(() => this.conv_in.forward(z));
    const input = h;
    h = this.mid_block.forward(input, null, null);
    for (const block of this.up_blocks.items) h = block.forward(h);
    const last = h;
    return tidy(() => this.conv_out.forward(this.act(this.conv_norm_out.forward(last))));
  }
}

/** Encoder: image [B, in, H, W] -> moments [B, 2·latent (double_z), H/2^(n−1), W/2^(n−1)]. */
export class Encoder extends Module {
  readonly conv_in: Conv2d;
  readonly down_blocks: ModuleList<DownBlock2D>;
  readonly mid_block: MidBlock2D;
  readonly conv_norm_out: GroupNorm;
  readonly conv_out: Conv2d;
  private readonly act: Activation;
  constructor(o: CoderOptions) {
    super();
    const boc = o.blockOutChannels, n = boc.length;
    this.act = activation(o.act);
    this.conv_in = this.module("conv_in", new Conv2d(o.inChannels, boc[0], 3, { padding: 1 }));
    let outC = boc[0];
    this.down_blocks = this.module("down_blocks", new ModuleList(boc.map((c, i) => {
      const inC = outC;
      outC = c;
      return new DownBlock2D(opts(o, inC, outC, o.layersPerBlock), false, i < n - 1, 0);
    })));
    this.mid_block = this.module("mid_block", new MidBlock2D(opts(o, boc[n - 1], boc[n - 1], 1), o.midBlockAddAttention ? "self" : "none", 1, boc[n - 1]));
    this.conv_norm_out = this.module("conv_norm_out", new GroupNorm(o.groups, boc[n - 1], EPS));
    this.conv_out = this.module("conv_out", new Conv2d(boc[n - 1], 2 * o.outChannels, 3, { padding: 1 }));
  }
  forward(x: Tensor): Tensor {
    let h = tidy(() => this.conv_in.forward(x));
    for (const block of this.down_blocks.items) h = block.forward(h, null, null).out;
    const input = h;
    h = this.mid_block.forward(input, null, null);
    const last = h;
    return tidy(() => this.conv_out.forward(this.act(this.conv_norm_out.forward(last))));
  }
}
