/**
 * UNet2DConditionModel (diffusers' models/unets/unet_2d_condition.py) for SD 1.x/2.x configs:
 *
 *   t → sinusoidal time_proj → time_embedding (temb)
 *   conv_in → down_blocks (skips kept) → mid_block → up_blocks (skips consumed) → norm/act/conv_out
 *
 * with CrossAttnDownBlock2D / DownBlock2D, UNetMidBlock2DCrossAttn, UpBlock2D / CrossAttnUpBlock2D.
 * As diffusers, `attention_head_dim` is read as the number of heads when num_attention_heads is
 * null. Options beyond SD's (class/addition embeddings, time conditioning, scale-shift norms, …)
 * are refused by name.
 */
import type { JsonObject } from "../../hub/index.js";
import { activation, type Activation } from "../../nn/activations.js";
import { Conv2d, GroupNorm, ModuleList } from "../../nn/index.js";
import { tidy } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";
import { SinusoidalTimesteps, sinusoidFrequencies, TimestepEmbedding, timestepTensor } from "./embeddings.js";
import { cfgNum, ModelMixin, perBlock, refuseOption } from "./modeling_utils.js";
import { DownBlock2D, MidBlock2D, UpBlock2D, type BlockOptions } from "./unet_2d_blocks.js";

const NAME = "UNet2DConditionModel";
const DOWN = ["CrossAttnDownBlock2D", "DownBlock2D"];
const UP = ["CrossAttnUpBlock2D", "UpBlock2D"];

export class UNet2DConditionModel extends ModelMixin {
  readonly conv_in: Conv2d;
  readonly time_embedding: TimestepEmbedding;
  readonly down_blocks: ModuleList<DownBlock2D>;
  readonly mid_block: MidBlock2D;
  readonly up_blocks: ModuleList<UpBlock2D>;
  readonly conv_norm_out: GroupNorm;
  readonly conv_out: Conv2d;
  readonly inChannels: number;
  readonly sampleSize: number;
  private readonly act: Activation;
  /** get_timestep_embedding of the timestep tensor (Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)). */
  readonly timeProj: SinusoidalTimesteps;
  private readonly centerInputSample: boolean;

  /** Throws naming the config field for anything outside SD 1.x/2.x's UNet. */
  constructor(config: JsonObject) {
    super(config);
    for (const [k, off] of [["class_embed_type", null], ["addition_embed_type", null], ["time_cond_proj_dim", null], ["encoder_hid_dim", null],
      ["encoder_hid_dim_type", null], ["resnet_time_scale_shift", "default"], ["attention_type", "default"], ["dual_cross_attention", false],
      ["cross_attention_norm", null], ["time_embedding_type", "positional"], ["time_embedding_act_fn", null], ["timestep_post_act", null],
      ["resnet_skip_time_act", false], ["num_class_embeds", null], ["resnet_out_scale_factor", 1], ["mid_block_only_cross_attention", null],
      ["reverse_transformer_layers_per_block", null], ["class_embeddings_concat", false]] as [string, unknown][]) refuseOption(config, k, off, NAME);
    const boc = config.block_out_channels as number[];
    const downTypes = (config.down_block_types ?? ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"]) as string[];
    const upTypes = (config.up_block_types ?? ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"]) as string[];
    const midType = config.mid_block_type ?? "UNetMidBlock2DCrossAttn";
    for (const t of downTypes) if (!DOWN.includes(t)) throw new Error(`${NAME}: down block type ${t} is not supported; supported: ${DOWN.join(", ")}`);
    for (const t of upTypes) if (!UP.includes(t)) throw new Error(`${NAME}: up block type ${t} is not supported; supported: ${UP.join(", ")}`);
    if (midType !== "UNetMidBlock2DCrossAttn") throw new Error(`${NAME}: mid_block_type ${JSON.stringify(midType)} is not supported; supported: UNetMidBlock2DCrossAttn`);
    if (!Array.isArray(boc) || boc.length !== downTypes.length || upTypes.length !== downTypes.length) {
      throw new Error(`${NAME}: block_out_channels, down_block_types and up_block_types must have the same length`);
    }
    const n = boc.length;
    const actName = (config.act_fn ?? "silu") as string;
    this.act = activation(actName);
    this.inChannels = cfgNum(config, "in_channels", 4, NAME);
    this.sampleSize = cfgNum(config, "sample_size", 64, NAME);
    const outChannels = cfgNum(config, "out_channels", 4, NAME);
    const groups = cfgNum(config, "norm_num_groups", 32, NAME);
    const eps = cfgNum(config, "norm_eps", 1e-5, NAME);
    const cross = cfgNum(config, "cross_attention_dim", 1280, NAME);
    const layers = perBlock<number>(config, "layers_per_block", 2, n, NAME);
    const tLayers = perBlock<number>(config, "transformer_layers_per_block", 1, n, NAME);
    const heads = perBlock<number>(config, config.num_attention_heads != null ? "num_attention_heads" : "attention_head_dim", 8, n, NAME);
    const onlyCross = perBlock<boolean>(config, "only_cross_attention", false, n, NAME);
    const linearProj = config.use_linear_projection === true;
    const inK = cfgNum(config, "conv_in_kernel", 3, NAME), outK = cfgNum(config, "conv_out_kernel", 3, NAME);
    const flipSinToCos = config.flip_sin_to_cos !== false;
    const freqShift = cfgNum(config, "freq_shift", 0, NAME);
    this.centerInputSample = config.center_input_sample === true;
    this.timeProj = new SinusoidalTimesteps(boc[0], flipSinToCos, sinusoidFrequencies(boc[0], freqShift));
    const temb = boc[0] * 4;

    this.conv_in = this.module("conv_in", new Conv2d(this.inChannels, boc[0], inK, { padding: (inK - 1) / 2 }));
    this.time_embedding = this.module("time_embedding", new TimestepEmbedding(boc[0], temb, actName));
    const base = (i: number, inC: number, outC: number, numLayers: number): BlockOptions => ({
      numLayers, inChannels: inC, outChannels: outC, tembChannels: temb, eps, groups, act: actName, heads: heads[i],
      crossAttentionDim: cross, transformerLayers: tLayers[i], useLinearProjection: linearProj, onlyCrossAttention: onlyCross[i],
    });
    let outC = boc[0];
    const downs = downTypes.map((t, i) => {
      const inC = outC;
      outC = boc[i];
      return new DownBlock2D(base(i, inC, outC, layers[i]), t === "CrossAttnDownBlock2D", i < n - 1, cfgNum(config, "downsample_padding", 1, NAME));
    });
    this.down_blocks = this.module("down_blocks", new ModuleList(downs));
    this.mid_block = this.module("mid_block", new MidBlock2D(base(n - 1, boc[n - 1], boc[n - 1], 1), "cross", cfgNum(config, "mid_block_scale_factor", 1, NAME)));
    const rboc = [...boc].reverse(), rheads = [...heads].reverse(), rlayers = [...layers].reverse(), rt = [...tLayers].reverse(), ro = [...onlyCross].reverse();
    outC = rboc[0];
    const ups = upTypes.map((t, i) => {
      const prev = outC;
      outC = rboc[i];
      const inC = rboc[Math.min(i + 1, n - 1)];
      const o: BlockOptions = { ...base(0, inC, outC, rlayers[i] + 1), heads: rheads[i], transformerLayers: rt[i], onlyCrossAttention: ro[i] };
      return new UpBlock2D(o, prev, t === "CrossAttnUpBlock2D", i < n - 1);
    });
    this.up_blocks = this.module("up_blocks", new ModuleList(ups));
    this.conv_norm_out = this.module("conv_norm_out", new GroupNorm(groups, boc[0], eps));
    this.conv_out = this.module("conv_out", new Conv2d(boc[0], outChannels, outK, { padding: (outK - 1) / 2 }));
  }

  /**
   * sample [B, in_channels, h, w] float32, timestep (a float32 tensor [1] or [B] on the sample's
   * device, or a JS number as the scheduler gives it; a compiled forward guards a JS number by value,
   * so pass a tensor there), encoderHiddenStates [B, L, cross_attention_dim] -> [B, out_channels, h, w].
   */
  forward(sample: Tensor, timestep: number | Tensor, encoderHiddenStates: Tensor): Tensor {
    if (sample.ndim !== 4 || sample.shape[1] !== this.inChannels) throw new RangeError(`${NAME}: sample must be [B, ${this.inChannels}, h, w], got [${sample.shape}]`);
    const B = sample.shape[0];
    const temb = tidy(() => this.time_embedding.forward(this.timeProj.embed(timestepTensor(timestep, sample.device), B)));
    let h = tidy(() => this.conv_in.forward(this.centerInputSample ? sample.mul(2).sub(1) : sample));
    const skips: Tensor[] = [h];
    for (const block of this.down_blocks.items) {
      const { out, states } = block.forward(h, temb, encoderHiddenStates);
      skips.push(...states);
      h = out;
    }
    h = this.mid_block.forward(h, temb, encoderHiddenStates);
    this.up_blocks.items.forEach((block, i) => {
      const k = block.resnets.items.length;
      const mine = skips.splice(skips.length - k, k);
      const next = skips[skips.length - 1];
      const size: [number, number] | undefined = i < this.up_blocks.items.length - 1 ? [next.shape[2], next.shape[3]] : undefined;
      h = block.forward(h, mine, temb, encoderHiddenStates, size);
    });
    const last = h;
    return tidy(() => this.conv_out.forward(this.act(this.conv_norm_out.forward(last))));
  }
}
