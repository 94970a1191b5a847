/**
 * FluxTransformer2DModel (diffusers' models/transformers/transformer_flux.py, with the pieces it
 * uses from embeddings.py and normalization.py): the MM-DiT of FLUX.1.
 *
 *   temb = timestep_embedder(sinusoid(t·1000)) [+ guidance_embedder(sinusoid(g·1000))] + text_embedder(pooled)
 *   txt = context_embedder(T5 states); img = x_embedder(packed latents)
 *   N x FluxTransformerBlock (two streams, joint attention, AdaLayerNormZero modulation)
 *   M x FluxSingleTransformerBlock (one stream [txt; img], attention ‖ MLP in parallel)
 *   -> norm_out (AdaLayerNormContinuous) -> proj_out on the image tokens
 *
 * Attention uses RoPE over the (t, h, w) position ids with axes_dims_rope channels per axis.
 * Parameter names equal the checkpoint's (diffusion_pytorch_model.safetensors).
 */
import type { Device } from "../../devices/device.js";
import { Linear, RMSNorm } from "../../nn/layers.js";
import type { JsonObject } from "../../hub/index.js";
import { Module, ModuleList } from "../../nn/module.js";
import { tensor } from "../../tensor/creation.js";
import { add, applyRotary, cat, geluTanh, layerNorm, mul, scaledDotProductAttention, silu } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { ModelMixin } from "./modeling_utils.js";
import { SinusoidalTimesteps, timestepTensor } from "./embeddings.js";

// ------------------------------------------------------------------ config

/** The transformer/config.json fields, with diffusers' defaults (FLUX.1 sizes). */
export interface FluxTransformerConfig {
  patch_size: number;
  in_channels: number;
  out_channels: number | null;
  num_layers: number;
  num_single_layers: number;
  attention_head_dim: number;
  num_attention_heads: number;
  joint_attention_dim: number;
  pooled_projection_dim: number;
  guidance_embeds: boolean;
  axes_dims_rope: number[];
}

const DEFAULTS: FluxTransformerConfig = {
  patch_size: 1, in_channels: 64, out_channels: null, num_layers: 19, num_single_layers: 38, attention_head_dim: 128,
  num_attention_heads: 24, joint_attention_dim: 4096, pooled_projection_dim: 768, guidance_embeds: false, axes_dims_rope: [16, 56, 56],
};

// ------------------------------------------------------------------ embeddings (host-side tables)

/**
 * The frequencies of get_timestep_embedding(t, 256, flip_sin_to_cos=True, downscale_freq_shift=0):
 * f_j = exp(-ln(10000)·j/128), rounded in float32 steps as torch computes them.
 */
function fluxFrequencies(half: number): Float32Array {
  const f = Math.fround;
  const negLogPeriod = f(-Math.log(10000));
  return Float32Array.from({ length: half }, (_, j) => f(Math.exp(f(f(negLogPeriod * j) / half))));
}

/** Rotary tables of one forward: cos and sin [1, S, head_dim] in the half-split channel order (see FluxPosEmbed). */
export interface FluxRotaryEmbedding {
  cos: Tensor;
  sin: Tensor;
}

/**
 * FluxPosEmbed (theta 10000): for position ids [S][n_axes] (text ids then image ids), per axis a
 * with d_a = axes_dim[a] channels, angles pos_a · theta^(-2j/d_a), j < d_a/2, in float64 as
 * diffusers, cos/sin rounded to float32. diffusers interleaves each angle over channel pairs
 * (2j, 2j+1); here the head channels are reordered evens-then-odds before rotation (the same
 * permutation of q and k leaves q·k unchanged), so the tables are [angles; angles] for
 * rotate_half-style {@link applyRotary}.
 */
export function fluxRotaryEmbedding(ids: readonly (readonly number[])[], axesDim: readonly number[], device: Device, theta = 10000): FluxRotaryEmbedding {
  const half = axesDim.reduce((s, d) => s + d, 0) / 2;
  const freqs: [axis: number, freq: number][] = [];
  axesDim.forEach((d, a) => {
    for (let j = 0; j < d; j += 2) freqs.push([a, 1.0 / theta ** (j / d)]);
  });
  const S = ids.length;
  const cos = new Float32Array(S * 2 * half), sin = new Float32Array(S * 2 * half);
  ids.forEach((pos, s) => {
    if (pos.length !== axesDim.length) throw new RangeError(`FluxPosEmbed: position ids have ${pos.length} axes, axes_dims_rope has ${axesDim.length}`);
    freqs.forEach(([a, fr], j) => {
      const angle = Math.fround(pos[a]) * fr;
      const row = s * 2 * half;
      cos[row + j] = cos[row + half + j] = Math.cos(angle);
      sin[row + j] = sin[row + half + j] = Math.sin(angle);
    });
  });
  const opts = { shape: [1, S, 2 * half], dtype: "float32" as const, device };
  return { cos: tensor(cos, opts), sin: tensor(sin, opts) };
}

/** Reorder the last dim's channels evens-then-odds: [B, S, H, D] -> contiguous [B, S, H, D]. */
function deinterleave(x: Tensor): Tensor {
  const [B, S, H, D] = x.shape;
  return x.reshape(B, S, H, D / 2, 2).permute(0, 1, 2, 4, 3).reshape(B, S, H, D);
}

// ------------------------------------------------------------------ small modules

/** TimestepEmbedding / PixArtAlphaTextProjection: linear_2(silu(linear_1(x))). */
class MLPEmbedding extends Module {
  readonly linear1: Linear;
  readonly linear2: Linear;
  constructor(inDim: number, dim: number) {
    super();
    this.linear1 = this.module("linear_1", new Linear(inDim, dim));
    this.linear2 = this.module("linear_2", new Linear(dim, dim));
  }
  forward(x: Tensor): Tensor {
    return this.linear2.forward(silu(this.linear1.forward(x)));
  }
}

/** CombinedTimestep(Guidance)TextProjEmbeddings: the conditioning vector temb [B, dim]. */
class TimeTextEmbed extends Module {
  readonly timestepEmbedder: MLPEmbedding;
  readonly guidanceEmbedder: MLPEmbedding | null;
  readonly textEmbedder: MLPEmbedding;
  /** [cos(t·f), sin(t·f)] of 256 channels, on device. */
  readonly sinusoid = new SinusoidalTimesteps(256, true, fluxFrequencies(128));
  constructor(dim: number, pooledDim: number, guidance: boolean) {
    super();
    this.timestepEmbedder = this.module("timestep_embedder", new MLPEmbedding(256, dim));
    this.guidanceEmbedder = guidance ? this.module("guidance_embedder", new MLPEmbedding(256, dim)) : null;
    this.textEmbedder = this.module("text_embedder", new MLPEmbedding(pooledDim, dim));
  }
  /** `timestep`, `guidance`: float32 [1] or [B], already ×1000. */
  forward(timestep: Tensor, guidance: Tensor | null, pooled: Tensor): Tensor {
    const B = pooled.shape[0];
    const sinusoid = (v: Tensor) => this.sinusoid.embed(v, B);
    let emb = this.timestepEmbedder.forward(sinusoid(timestep));
    if (this.guidanceEmbedder && guidance) emb = add(emb, this.guidanceEmbedder.forward(sinusoid(guidance)));
    return add(emb, this.textEmbedder.forward(pooled));
  }
}

/** linear(silu(temb)) split into `n` modulation vectors [B, 1, dim] (the AdaLayerNorm* projections). */
class Modulation extends Module {
  readonly linear: Linear;
  constructor(dim: number, private readonly n: number) {
    super();
    this.linear = this.module("linear", new Linear(dim, n * dim));
  }
  forward(temb: Tensor): Tensor[] {
    return this.linear.forward(silu(temb)).unsqueeze(1).chunk(this.n, 2);
  }
}

/** LayerNorm without affine parameters (eps 1e-6), then x·(1 + scale) + shift. */
function modulate(x: Tensor, shift: Tensor, scale: Tensor): Tensor {
  return add(mul(layerNorm(x, null, null, 1e-6), add(scale, 1)), shift);
}

/** FeedForward(activation_fn="gelu-approximate"): net.2(gelu_tanh(net.0.proj(x))). */
class FeedForward extends Module {
  readonly proj: Linear;
  readonly out: Linear;
  constructor(dim: number, inner: number) {
    super();
    // net.1 is diffusers' Dropout (no parameters), kept so that net.2 has the checkpoint's name.
    const net = this.module("net", new ModuleList<Module>([new GeluProj(dim, inner), new Module(), new Linear(inner, dim)]));
    this.proj = (net.items[0] as GeluProj).proj;
    this.out = net.items[2] as Linear;
  }
  forward(x: Tensor): Tensor {
    return this.out.forward(geluTanh(this.proj.forward(x)));
  }
}

/** diffusers' GELU module (its `proj` Linear; the activation is applied by FeedForward). */
class GeluProj extends Module {
  readonly proj: Linear;
  constructor(dim: number, inner: number) {
    super();
    this.proj = this.module("proj", new Linear(dim, inner));
  }
}

// ------------------------------------------------------------------ attention

/**
 * FluxAttention: q/k/v projections with per-head RMSNorm on q and k; with `added` (double-stream
 * blocks) the text stream has its own add_{q,k,v}_proj and norm_added_{q,k}, and text tokens come
 * first in the joint sequence. Outputs: to_out.0 (image) and to_add_out (text); single-stream
 * blocks have neither (pre_only).
 */
class FluxAttention extends Module {
  readonly toQ: Linear; readonly toK: Linear; readonly toV: Linear;
  readonly normQ: RMSNorm; readonly normK: RMSNorm;
  readonly toOut: Linear | null;
  readonly added: { q: Linear; k: Linear; v: Linear; normQ: RMSNorm; normK: RMSNorm; out: Linear } | null;

  constructor(dim: number, private readonly heads: number, private readonly headDim: number, joint: boolean) {
    super();
    const inner = heads * headDim;
    this.normQ = this.module("norm_q", new RMSNorm(headDim, 1e-6));
    this.normK = this.module("norm_k", new RMSNorm(headDim, 1e-6));
    this.toQ = this.module("to_q", new Linear(dim, inner));
    this.toK = this.module("to_k", new Linear(dim, inner));
    this.toV = this.module("to_v", new Linear(dim, inner));
    this.toOut = joint ? (this.module("to_out", new ModuleList([new Linear(inner, dim)])).items[0]) : null;
    this.added = joint ? {
      normQ: this.module("norm_added_q", new RMSNorm(headDim, 1e-6)),
      normK: this.module("norm_added_k", new RMSNorm(headDim, 1e-6)),
      q: this.module("add_q_proj", new Linear(dim, inner)),
      k: this.module("add_k_proj", new Linear(dim, inner)),
      v: this.module("add_v_proj", new Linear(dim, inner)),
      out: this.module("to_add_out", new Linear(inner, dim)),
    } : null;
  }

  /** Heads of a projection: [B, S, inner] -> [B, S, H, D]. */
  private split(t: Tensor): Tensor {
    const [B, S] = t.shape;
    return t.reshape(B, S, this.heads, this.headDim);
  }

  /**
   * Joint attention over [text; x] (or x alone). x [B, S, dim], text [B, T, dim] or null,
   * rope over the whole sequence. Returns [B, T + S, inner] before the output projections.
   */
  attend(x: Tensor, text: Tensor | null, rope: FluxRotaryEmbedding): Tensor {
    let q = this.normQ.forward(this.split(this.toQ.forward(x)));
    let k = this.normK.forward(this.split(this.toK.forward(x)));
    let v = this.split(this.toV.forward(x));
    if (this.added && text) {
      const a = this.added;
      q = cat([a.normQ.forward(this.split(a.q.forward(text))), q], 1);
      k = cat([a.normK.forward(this.split(a.k.forward(text))), k], 1);
      v = cat([this.split(a.v.forward(text)), v], 1);
    }
    const [B, L] = q.shape;
    const cos = rope.cos.expand(B, L, this.headDim), sin = rope.sin.expand(B, L, this.headDim);
    q = applyRotary(deinterleave(q), cos, sin);
    k = applyRotary(deinterleave(k), cos, sin);
    const out = scaledDotProductAttention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2));
    return out.transpose(1, 2).reshape(B, L, this.heads * this.headDim);
  }
}

// ------------------------------------------------------------------ blocks

/** FluxTransformerBlock: two streams (image, text), each AdaLayerNormZero-modulated, joint attention. */
class FluxTransformerBlock extends Module {
  readonly norm1: Modulation;
  readonly norm1Context: Modulation;
  readonly attn: FluxAttention;
  readonly ff: FeedForward;
  readonly ffContext: FeedForward;

  constructor(dim: number, heads: number, headDim: number) {
    super();
    this.norm1 = this.module("norm1", new Modulation(dim, 6));
    this.norm1Context = this.module("norm1_context", new Modulation(dim, 6));
    this.attn = this.module("attn", new FluxAttention(dim, heads, headDim, true));
    this.ff = this.module("ff", new FeedForward(dim, 4 * dim));
    this.ffContext = this.module("ff_context", new FeedForward(dim, 4 * dim));
  }

  /** Returns [text, image], both updated. */
  forward(x: Tensor, text: Tensor, temb: Tensor, rope: FluxRotaryEmbedding): [Tensor, Tensor] {
    const [shiftMsa, scaleMsa, gateMsa, shiftMlp, scaleMlp, gateMlp] = this.norm1.forward(temb);
    const [cShiftMsa, cScaleMsa, cGateMsa, cShiftMlp, cScaleMlp, cGateMlp] = this.norm1Context.forward(temb);
    const T = text.shape[1];
    const joint = this.attn.attend(modulate(x, shiftMsa, scaleMsa), modulate(text, cShiftMsa, cScaleMsa), rope);
    const textAttn = this.attn.added!.out.forward(joint.narrow(1, 0, T));
    const imgAttn = this.attn.toOut!.forward(joint.narrow(1, T, joint.shape[1] - T));

    x = add(x, mul(gateMsa, imgAttn));
    x = add(x, mul(gateMlp, this.ff.forward(modulate(x, shiftMlp, scaleMlp))));
    text = add(text, mul(cGateMsa, textAttn));
    text = add(text, mul(cGateMlp, this.ffContext.forward(modulate(text, cShiftMlp, cScaleMlp))));
    return [text, x];
  }
}

/** FluxSingleTransformerBlock: one stream; attention and a gelu-tanh MLP side by side, one proj_out. */
class FluxSingleTransformerBlock extends Module {
  readonly norm: Modulation;
  readonly projMlp: Linear;
  readonly projOut: Linear;
  readonly attn: FluxAttention;

  constructor(dim: number, heads: number, headDim: number) {
    super();
    const mlp = 4 * dim;
    this.norm = this.module("norm", new Modulation(dim, 3));
    this.projMlp = this.module("proj_mlp", new Linear(dim, mlp));
    this.projOut = this.module("proj_out", new Linear(dim + mlp, dim));
    this.attn = this.module("attn", new FluxAttention(dim, heads, headDim, false));
  }

  /** h: [B, T + S, dim] (text then image). */
  forward(h: Tensor, temb: Tensor, rope: FluxRotaryEmbedding): Tensor {
    const [shift, scale, gate] = this.norm.forward(temb);
    const normed = modulate(h, shift, scale);
    const mlp = geluTanh(this.projMlp.forward(normed));
    const attn = this.attn.attend(normed, null, rope);
    return add(h, mul(gate, this.projOut.forward(cat([attn, mlp], 2))));
  }
}

// ------------------------------------------------------------------ model

/** Inputs of {@link FluxTransformer2DModel.forward} (diffusers' keyword names, camel-cased). */
export interface FluxTransformerInputs {
  /** Packed latents [B, S, in_channels]. */
  hiddenStates: Tensor;
  /** T5 states [B, T, joint_attention_dim]. */
  encoderHiddenStates: Tensor;
  /** CLIP pooled output [B, pooled_projection_dim]. */
  pooledProjections: Tensor;
  /** The scheduler's timestep / 1000 (sigma), one per batch row (or one for all); a float32 tensor
   * [1] or [B] keeps a compiled forward from recompiling per step (JS numbers are guarded by value). */
  timestep: number | readonly number[] | Tensor;
  /** The guidance scale, one per row (or one for all); required when config.guidance_embeds. */
  guidance?: number | readonly number[] | Tensor | null;
  /** Position ids [S][3] of the image tokens and [T][3] of the text tokens. */
  imgIds?: readonly (readonly number[])[];
  txtIds?: readonly (readonly number[])[];
  /** Rotary tables of [txtIds; imgIds] from {@link FluxTransformer2DModel.rotaryEmbedding}, to reuse across steps; when
   * given, the ids may be left out (a compiled forward then does not guard thousands of id values per call). */
  imageRotaryEmb?: FluxRotaryEmbedding;
}

/**
 * FluxTransformer2DModel: forward returns the velocity prediction [B, S, out_channels] (float32).
 * Throws RangeError on inputs of the wrong shape, and when guidance is required but missing.
 */
export class FluxTransformer2DModel extends ModelMixin {
  /** config.json with diffusers' defaults filled in. */
  readonly c: FluxTransformerConfig;
  readonly innerDim: number;
  readonly outChannels: number;
  readonly timeTextEmbed: TimeTextEmbed;
  readonly contextEmbedder: Linear;
  readonly xEmbedder: Linear;
  readonly transformerBlocks: ModuleList<FluxTransformerBlock>;
  readonly singleTransformerBlocks: ModuleList<FluxSingleTransformerBlock>;
  readonly normOut: Modulation;
  readonly projOut: Linear;

  /** `config`: transformer/config.json (missing fields take diffusers' defaults). Throws on unsupported values. */
  constructor(config: JsonObject) {
    super(config);
    const given = Object.fromEntries(Object.entries(config).filter(([k, v]) => v !== undefined && v !== null && !k.startsWith("_")));
    const c = this.c = { ...DEFAULTS, ...given } as FluxTransformerConfig;
    const headDim = c.attention_head_dim;
    if (c.axes_dims_rope.reduce((s, d) => s + d, 0) !== headDim) {
      throw new Error(`FluxTransformer2DModel config: axes_dims_rope [${c.axes_dims_rope}] must sum to attention_head_dim ${headDim}`);
    }
    if (c.patch_size !== 1) throw new Error(`FluxTransformer2DModel config: patch_size ${c.patch_size} is not supported (FLUX uses 1; the pipeline packs 2x2 patches)`);
    const dim = this.innerDim = c.num_attention_heads * headDim;
    this.outChannels = c.out_channels ?? c.in_channels;
    this.timeTextEmbed = this.module("time_text_embed", new TimeTextEmbed(dim, c.pooled_projection_dim, c.guidance_embeds));
    this.contextEmbedder = this.module("context_embedder", new Linear(c.joint_attention_dim, dim));
    this.xEmbedder = this.module("x_embedder", new Linear(c.in_channels, dim));
    this.transformerBlocks = this.module("transformer_blocks", new ModuleList(
      Array.from({ length: c.num_layers }, () => new FluxTransformerBlock(dim, c.num_attention_heads, headDim))));
    this.singleTransformerBlocks = this.module("single_transformer_blocks", new ModuleList(
      Array.from({ length: c.num_single_layers }, () => new FluxSingleTransformerBlock(dim, c.num_attention_heads, headDim))));
    this.normOut = this.module("norm_out", new Modulation(dim, 2));
    this.projOut = this.module("proj_out", new Linear(dim, c.patch_size * c.patch_size * this.outChannels));
  }

  /** The rotary tables for text ids then image ids (FluxPosEmbed), on `device`. */
  rotaryEmbedding(txtIds: readonly (readonly number[])[], imgIds: readonly (readonly number[])[], device: Device): FluxRotaryEmbedding {
    return fluxRotaryEmbedding([...txtIds, ...imgIds], this.c.axes_dims_rope, device);
  }

  forward(inputs: FluxTransformerInputs): Tensor {
    const c = this.c;
    const { hiddenStates: x0, encoderHiddenStates: txt0, pooledProjections: pooled } = inputs;
    const [B, S] = x0.shape, T = txt0.shape[1];
    const name = "FluxTransformer2DModel";
    if (x0.ndim !== 3 || x0.shape[2] !== c.in_channels) throw new RangeError(`${name}: hidden_states must be [B, S, ${c.in_channels}], got [${x0.shape}]`);
    if (txt0.ndim !== 3 || txt0.shape[0] !== B || txt0.shape[2] !== c.joint_attention_dim) throw new RangeError(`${name}: encoder_hidden_states must be [${B}, T, ${c.joint_attention_dim}], got [${txt0.shape}]`);
    if (pooled.ndim !== 2 || pooled.shape[0] !== B || pooled.shape[1] !== c.pooled_projection_dim) throw new RangeError(`${name}: pooled_projections must be [${B}, ${c.pooled_projection_dim}], got [${pooled.shape}]`);
    const { imgIds, txtIds, imageRotaryEmb } = inputs;
    if (imgIds && txtIds) {
      if (imgIds.length !== S || txtIds.length !== T) throw new RangeError(`${name}: img_ids/txt_ids have ${imgIds.length}/${txtIds.length} rows for ${S} image and ${T} text tokens`);
    } else if (!imageRotaryEmb) {
      throw new RangeError(`${name}: give img_ids and txt_ids, or image_rotary_emb`);
    }
    if (imageRotaryEmb && imageRotaryEmb.cos.shape[1] !== T + S) throw new RangeError(`${name}: image_rotary_emb has ${imageRotaryEmb.cos.shape[1]} positions for ${T} text + ${S} image tokens`);
    const perRow = (v: number | readonly number[] | Tensor, what: string) => {
      const t = timestepTensor(v, x0.device);
      if (t.numel !== 1 && t.numel !== B) throw new RangeError(`${name}: ${what} has ${t.numel} values for batch ${B}`);
      // diffusers: timestep.to(dtype) * 1000 on float32 tensors.
      return t.to("float32").mul(1000);
    };
    if (c.guidance_embeds && (inputs.guidance === undefined || inputs.guidance === null)) throw new RangeError(`${name}: guidance is required (config.guidance_embeds is true)`);
    const temb = this.timeTextEmbed.forward(perRow(inputs.timestep, "timestep"), c.guidance_embeds ? perRow(inputs.guidance!, "guidance") : null, pooled);
    const rope = imageRotaryEmb ?? this.rotaryEmbedding(txtIds!, imgIds!, x0.device);

    let x = this.xEmbedder.forward(x0);
    let txt = this.contextEmbedder.forward(txt0);
    for (const block of this.transformerBlocks.items) [txt, x] = block.forward(x, txt, temb, rope);
    let h = cat([txt, x], 1);
    for (const block of this.singleTransformerBlocks.items) h = block.forward(h, temb, rope);
    x = h.narrow(1, T, S);
    // AdaLayerNormContinuous: the projection splits into (scale, shift), in that order.
    const [scale, shift] = this.normOut.forward(temb);
    return this.projOut.forward(modulate(x, shift, scale));
  }
}
