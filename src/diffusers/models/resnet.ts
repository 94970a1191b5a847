/**
 * The convolutional blocks of diffusers' models/resnet.py, models/downsampling.py and
 * models/upsampling.py: ResnetBlock2D (time embedding added between the two convs, "default"
 * time_embedding_norm), Downsample2D (strided 3×3 conv, with the asymmetric (0, 1, 0, 1) pad when
 * padding is 0, as the VAE encoder) and Upsample2D (nearest ×2 or to a given size, then a 3×3 conv).
 * Activations [B, C, H, W] float32.
 */
import { activation, type Activation } from "../../nn/activations.js";
import { Conv2d, GroupNorm, Linear, Module } from "../../nn/index.js";
import { add, interpolate, pad, tidy } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";

export interface ResnetOptions {
  inChannels: number;
  outChannels: number;
  /** Size of the time embedding (UNet), or null (VAE: no time_emb_proj). */
  tembChannels: number | null;
  groups: number;
  eps: number;
  /** The block output is (shortcut + h) / outputScaleFactor. */
  outputScaleFactor?: number;
  /** config act_fn ("silu"). */
  act?: string;
}

/** ResnetBlock2D: norm1 → act → conv1 (+ time_emb_proj(act(temb))) → norm2 → act → conv2, plus the (1×1-conv) shortcut. */
export class ResnetBlock2D extends Module {
  readonly norm1: GroupNorm;
  readonly conv1: Conv2d;
  readonly time_emb_proj: Linear | null;
  readonly norm2: GroupNorm;
  readonly conv2: Conv2d;
  readonly conv_shortcut: Conv2d | null;
  private readonly act: Activation;
  private readonly scale: number;

  constructor(o: ResnetOptions) {
    super();
    this.norm1 = this.module("norm1", new GroupNorm(o.groups, o.inChannels, o.eps));
    this.conv1 = this.module("conv1", new Conv2d(o.inChannels, o.outChannels, 3, { padding: 1 }));
    this.time_emb_proj = o.tembChannels === null ? null : this.module("time_emb_proj", new Linear(o.tembChannels, o.outChannels));
    this.norm2 = this.module("norm2", new GroupNorm(o.groups, o.outChannels, o.eps));
    this.conv2 = this.module("conv2", new Conv2d(o.outChannels, o.outChannels, 3, { padding: 1 }));
    this.conv_shortcut = o.inChannels === o.outChannels ? null : this.module("conv_shortcut", new Conv2d(o.inChannels, o.outChannels, 1));
    this.act = activation(o.act ?? "silu");
    this.scale = o.outputScaleFactor ?? 1;
  }

  /** x [B, Cin, H, W], temb [B, temb] or null -> [B, Cout, H, W]. */
  forward(x: Tensor, temb: Tensor | null): Tensor {
    // Nested scopes free each norm/activation output as soon as the next op has read it, so at
    // most three activations of the block's size are alive at once (PyTorch frees them by refcount).
    let h = this.conv1.forward(tidy(() => this.act(this.norm1.forward(x))));
    if (this.time_emb_proj && temb) {
      const t = this.time_emb_proj.forward(this.act(temb));
      const before = h;
      h = tidy(() => add(before, t.view(t.shape[0], t.shape[1], 1, 1)));
    }
    const mid = h;
    h = this.conv2.forward(tidy(() => this.act(this.norm2.forward(mid))));
    const out = add(this.conv_shortcut ? this.conv_shortcut.forward(x) : x, h);
    return this.scale === 1 ? out : out.div(this.scale);
  }
}

/** Downsample2D with use_conv: a 3×3 stride-2 conv named `conv`; padding 0 pads right/bottom by one first. */
export class Downsample2D extends Module {
  readonly conv: Conv2d;
  constructor(channels: number, outChannels: number, private readonly padding: number) {
    super();
    this.conv = this.module("conv", new Conv2d(channels, outChannels, 3, { stride: 2, padding }));
  }
  forward(x: Tensor): Tensor {
    return this.conv.forward(this.padding === 0 ? pad(x, [0, 1, 0, 1]) : x);
  }
}

/** Upsample2D with use_conv: nearest ×2 (or to `size`), then a 3×3 conv named `conv`. */
export class Upsample2D extends Module {
  readonly conv: Conv2d;
  constructor(channels: number, outChannels: number) {
    super();
    this.conv = this.module("conv", new Conv2d(channels, outChannels, 3, { padding: 1 }));
  }
  /** x [B, C, H, W] -> [B, Cout, 2H, 2W], or [B, Cout, size[0], size[1]] when `size` is given. */
  forward(x: Tensor, size?: [number, number]): Tensor {
    const up = size ? interpolate(x, { size, mode: "nearest" }) : interpolate(x, { scaleFactor: 2, mode: "nearest" });
    return this.conv.forward(up);
  }
}
