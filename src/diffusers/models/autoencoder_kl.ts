/**
 * AutoencoderKL (diffusers' models/autoencoders/autoencoder_kl.py): the SD/FLUX VAE.
 *   decode(z) = decoder(post_quant_conv(z))     (post_quant_conv only with use_post_quant_conv)
 *   encode(x) = quant_conv(encoder(x)) -> the diagonal Gaussian's mean and logvar (clamped to [−30, 20])
 * `scalingFactor` (and `shiftFactor`, FLUX) are config.json's; pipelines apply them.
 */
import type { JsonObject } from "../../hub/index.js";
import { Conv2d } from "../../nn/index.js";
import { maximum, minimum, tidy } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";
import { cfgNum, ModelMixin, refuseOption } from "./modeling_utils.js";
import { Decoder, Encoder, type CoderOptions } from "./vae.js";

const NAME = "AutoencoderKL";

export class AutoencoderKL extends ModelMixin {
  readonly encoder: Encoder;
  readonly decoder: Decoder;
  readonly quant_conv: Conv2d | null;
  readonly post_quant_conv: Conv2d | null;
  readonly latentChannels: number;
  readonly scalingFactor: number;
  /** FLUX's shift_factor; 0 when config.json has none. */
  readonly shiftFactor: number;
  /** 2^(len(block_out_channels) − 1): pixels per latent pixel. */
  readonly scaleFactor: number;

  /** Throws naming the field for block types other than DownEncoderBlock2D / UpDecoderBlock2D. */
  constructor(config: JsonObject) {
    super(config);
    const boc = (config.block_out_channels ?? [64]) as number[];
    for (const t of (config.down_block_types ?? []) as string[]) if (t !== "DownEncoderBlock2D") throw new Error(`${NAME}: down block type ${t} is not supported; supported: DownEncoderBlock2D`);
    for (const t of (config.up_block_types ?? []) as string[]) if (t !== "UpDecoderBlock2D") throw new Error(`${NAME}: up block type ${t} is not supported; supported: UpDecoderBlock2D`);
    refuseOption(config, "norm_type", "group", NAME);
    this.latentChannels = cfgNum(config, "latent_channels", 4, NAME);
    this.scalingFactor = cfgNum(config, "scaling_factor", 0.18215, NAME);
    this.shiftFactor = cfgNum(config, "shift_factor", 0, NAME);
    this.scaleFactor = 2 ** (boc.length - 1);
    const common = {
      blockOutChannels: boc, layersPerBlock: cfgNum(config, "layers_per_block", 1, NAME), groups: cfgNum(config, "norm_num_groups", 32, NAME),
      act: (config.act_fn ?? "silu") as string, midBlockAddAttention: config.mid_block_add_attention !== false,
    };
    const enc: CoderOptions = { ...common, inChannels: cfgNum(config, "in_channels", 3, NAME), outChannels: this.latentChannels };
    const dec: CoderOptions = { ...common, inChannels: this.latentChannels, outChannels: cfgNum(config, "out_channels", 3, NAME) };
    this.encoder = this.module("encoder", new Encoder(enc));
    this.decoder = this.module("decoder", new Decoder(dec));
    const L = this.latentChannels;
    this.quant_conv = config.use_quant_conv !== false ? this.module("quant_conv", new Conv2d(2 * L, 2 * L, 1)) : null;
    this.post_quant_conv = config.use_post_quant_conv !== false ? this.module("post_quant_conv", new Conv2d(L, L, 1)) : null;
  }

  /** Latents [B, latent_channels, h, w] (already divided by the scaling factor) -> decoder sample [B, 3, h·s, w·s], unclamped. */
  decode(z: Tensor): Tensor {
    if (z.ndim !== 4 || z.shape[1] !== this.latentChannels) throw new RangeError(`${NAME}.decode: expected latents [B, ${this.latentChannels}, h, w], got [${z.shape}]`);
    const q = this.post_quant_conv ? tidy(() => this.post_quant_conv!.forward(z)) : z;
    return this.decoder.forward(q);
  }

  /** Images [B, 3, H, W] in [−1, 1] -> the latent distribution's mean and logvar [B, latent, H/s, W/s]. */
  encode(x: Tensor): { mean: Tensor; logvar: Tensor } {
    return tidy(() => {
      const h = this.encoder.forward(x);
      const moments = this.quant_conv ? this.quant_conv.forward(h) : h;
      const [mean, logvar] = moments.chunk(2, 1);
      return { mean: mean.contiguous(), logvar: minimum(maximum(logvar, -30), 20) };
    });
  }
}
