/**
 * T5EncoderModel (transformers' models/t5/modeling_t5.py, encoder stack only; the T5 text encoder
 * of FLUX and other diffusion pipelines).
 *
 *   shared(ids) -> N x [x + SelfAttention(layer_norm(x)) (+ relative position bias);
 *                       x + DenseReluDense(layer_norm(x))] -> final_layer_norm
 *
 * T5's layer norm is an RMS norm without mean subtraction or bias; attention is not scaled by
 * 1/sqrt(d_kv); the relative position bias is computed once by block 0 and shared by all blocks.
 */
import type { Device } from "../../devices/device.js";
import { Embedding, Linear, RMSNorm } from "../../nn/layers.js";
import { activation, type Activation } from "../../nn/activations.js";
import { Module, ModuleList } from "../../nn/module.js";
import { fromBytes } from "../../tensor/creation.js";
import { encode } from "../../tensor/host.js";
import { mul, scaledDotProductAttention } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { bool, num, str, type RawConfig } from "../configuration.js";
import { PreTrainedModel, type CausalLMInputs } from "../modeling_utils.js";

// ------------------------------------------------------------------ config

/** T5Config fields the encoder reads, with transformers' defaults. */
export class T5Config {
  readonly vocabSize: number;
  readonly dModel: number;
  readonly dKv: number;
  readonly dFf: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numBuckets: number;
  readonly maxDistance: number;
  readonly eps: number;
  /** True for "gated-*" feed_forward_proj (wi_0, wi_1, wo); false for "relu"/"gelu" (wi, wo). */
  readonly gated: boolean;
  /** The feed-forward activation name ("gated-gelu" means gelu_new, as transformers' T5Config). */
  readonly denseAct: string;

  constructor(raw: RawConfig) {
    this.vocabSize = num(raw, "vocab_size", 32128);
    this.dModel = num(raw, "d_model", 512);
    this.dKv = num(raw, "d_kv", 64);
    this.dFf = num(raw, "d_ff", 2048);
    this.numLayers = num(raw, "num_layers", 6);
    this.numHeads = num(raw, "num_heads", 8);
    this.numBuckets = num(raw, "relative_attention_num_buckets", 32);
    this.maxDistance = num(raw, "relative_attention_max_distance", 128);
    this.eps = num(raw, "layer_norm_epsilon", 1e-6);
    const proj = str(raw, "feed_forward_proj", "relu");
    const parts = proj.split("-");
    if (parts.length > 2 || (parts.length === 2 && parts[0] !== "gated")) {
      throw new Error(`T5 config: feed_forward_proj '${proj}' is not a valid activation; use '{ACT_FN}' or 'gated-{ACT_FN}', e.g. 'gated-gelu'`);
    }
    this.gated = bool(raw, "is_gated_act", parts[0] === "gated");
    const act = parts[parts.length - 1];
    this.denseAct = act === "gelu" && this.gated ? "gelu_new" : str(raw, "dense_act_fn", act);
  }
}

// ------------------------------------------------------------------ relative position buckets

/**
 * T5Attention._relative_position_bucket for the encoder (bidirectional): the bucket of each
 * (query i, key j) pair for relative position j - i, as int64 ids [L, L]. Half the buckets hold
 * keys after the query; within a half, distances below maxExact = buckets/4 get their own bucket
 * and larger ones share log-spaced buckets up to maxDistance. The log arithmetic is done in
 * float32 steps as transformers does it on float32 tensors, so boundaries fall identically.
 */
export function relativePositionBuckets(L: number, numBuckets: number, maxDistance: number): number[] {
  const half = Math.floor(numBuckets / 2);
  const maxExact = Math.floor(half / 2);
  const f = Math.fround;
  const logRange = f(Math.log(maxDistance / maxExact));
  const out = new Array<number>(L * L);
  for (let i = 0; i < L; i++) {
    for (let j = 0; j < L; j++) {
      const rel = j - i;
      const n = Math.abs(rel);
      let bucket = rel > 0 ? half : 0;
      if (n < maxExact) {
        bucket += n;
      } else {
        const scaled = f(f(f(Math.log(f(f(n) / maxExact))) / logRange) * (half - maxExact));
        bucket += Math.min(maxExact + Math.trunc(scaled), half - 1);
      }
      out[i * L + j] = bucket;
    }
  }
  return out;
}

// ------------------------------------------------------------------ layers

/** T5Attention (q, k, v, o without bias; unscaled scores plus the position bias). */
class T5Attention extends Module {
  readonly q: Linear;
  readonly k: Linear;
  readonly v: Linear;
  readonly o: Linear;
  /** relative_attention_bias [num_buckets, num_heads]: block 0 only. */
  readonly relativeAttentionBias: Embedding | null;

  constructor(private readonly c: T5Config, hasRelativeBias: boolean) {
    super();
    const inner = c.numHeads * c.dKv;
    this.q = this.module("q", new Linear(c.dModel, inner, false));
    this.k = this.module("k", new Linear(c.dModel, inner, false));
    this.v = this.module("v", new Linear(c.dModel, inner, false));
    this.o = this.module("o", new Linear(inner, c.dModel, false));
    this.relativeAttentionBias = hasRelativeBias ? this.module("relative_attention_bias", new Embedding(c.numBuckets, c.numHeads)) : null;
  }

  /** Position bias [1, H, L, L] (float32) from this block's relative_attention_bias. */
  positionBias(L: number, device: Device): Tensor {
    if (!this.relativeAttentionBias) throw new Error("T5Attention: only block 0 has relative_attention_bias");
    const buckets = relativePositionBuckets(L, this.c.numBuckets, this.c.maxDistance);
    const ids = fromBytes(encode(buckets, "int64"), "int64", [L, L], device);
    return this.relativeAttentionBias.forward(ids).permute(2, 0, 1).unsqueeze(0);
  }

  /** x [B, L, d_model], bias [1, H, L, L] -> [B, L, d_model]. */
  forward(x: Tensor, bias: Tensor): Tensor {
    const [B, L] = x.shape;
    const { numHeads: H, dKv: D } = this.c;
    const heads = (t: Tensor) => t.reshape(B, L, H, D).transpose(1, 2);
    const attn = scaledDotProductAttention(heads(this.q.forward(x)), heads(this.k.forward(x)), heads(this.v.forward(x)), { mask: bias, scale: 1 });
    return this.o.forward(attn.transpose(1, 2).reshape(B, L, H * D));
  }
}

/** T5LayerSelfAttention: x + SelfAttention(layer_norm(x)). */
class T5LayerSelfAttention extends Module {
  readonly SelfAttention: T5Attention;
  readonly layerNorm: RMSNorm;
  constructor(c: T5Config, hasRelativeBias: boolean) {
    super();
    this.SelfAttention = this.module("SelfAttention", new T5Attention(c, hasRelativeBias));
    this.layerNorm = this.module("layer_norm", new RMSNorm(c.dModel, c.eps));
  }
  forward(x: Tensor, bias: Tensor): Tensor {
    return x.add(this.SelfAttention.forward(this.layerNorm.forward(x), bias));
  }
}

/** T5DenseGatedActDense (wo(act(wi_0 x) * wi_1 x)) or T5DenseActDense (wo(act(wi x))), no biases. */
class T5Dense extends Module {
  private readonly act: Activation;
  private readonly wi: Linear[];
  private readonly wo: Linear;
  constructor(c: T5Config) {
    super();
    this.act = activation(c.denseAct);
    this.wi = c.gated
      ? [this.module("wi_0", new Linear(c.dModel, c.dFf, false)), this.module("wi_1", new Linear(c.dModel, c.dFf, false))]
      : [this.module("wi", new Linear(c.dModel, c.dFf, false))];
    this.wo = this.module("wo", new Linear(c.dFf, c.dModel, false));
  }
  forward(x: Tensor): Tensor {
    const h = this.act(this.wi[0].forward(x));
    return this.wo.forward(this.wi.length === 2 ? mul(h, this.wi[1].forward(x)) : h);
  }
}

/** T5LayerFF: x + DenseReluDense(layer_norm(x)). */
class T5LayerFF extends Module {
  readonly DenseReluDense: T5Dense;
  readonly layerNorm: RMSNorm;
  constructor(c: T5Config) {
    super();
    this.DenseReluDense = this.module("DenseReluDense", new T5Dense(c));
    this.layerNorm = this.module("layer_norm", new RMSNorm(c.dModel, c.eps));
  }
  forward(x: Tensor): Tensor {
    return x.add(this.DenseReluDense.forward(this.layerNorm.forward(x)));
  }
}

/** T5Block of the encoder: layer.0 self-attention, layer.1 feed-forward. */
class T5Block extends Module {
  readonly attention: T5LayerSelfAttention;
  readonly ff: T5LayerFF;
  constructor(c: T5Config, hasRelativeBias: boolean) {
    super();
    const layer = this.module("layer", new ModuleList<Module>([new T5LayerSelfAttention(c, hasRelativeBias), new T5LayerFF(c)]));
    [this.attention, this.ff] = layer.items as [T5LayerSelfAttention, T5LayerFF];
  }
  forward(x: Tensor, bias: Tensor): Tensor {
    return this.ff.forward(this.attention.forward(x, bias));
  }
}

/** T5Stack (encoder): blocks then final_layer_norm; the embedding is the model's `shared`. */
class T5Stack extends Module {
  readonly block: ModuleList<T5Block>;
  readonly finalLayerNorm: RMSNorm;
  constructor(c: T5Config) {
    super();
    this.block = this.module("block", new ModuleList(Array.from({ length: c.numLayers }, (_, i) => new T5Block(c, i === 0))));
    this.finalLayerNorm = this.module("final_layer_norm", new RMSNorm(c.dModel, c.eps));
  }
}

// ------------------------------------------------------------------ model

/**
 * T5EncoderModel: token ids -> last_hidden_state. There is no attention mask: every position,
 * padding included, attends to every other, as when a diffusion pipeline calls
 * `text_encoder_2(input_ids)`. Parameter names equal the checkpoint's ("shared.weight",
 * "encoder.block.0.layer.0.SelfAttention.q.weight", …); a stored "encoder.embed_tokens.weight"
 * (a tied copy of shared) is skipped.
 */
export class T5EncoderModel extends PreTrainedModel {
  readonly c: T5Config;
  readonly shared: Embedding;
  readonly encoder: T5Stack;

  constructor(raw: RawConfig) {
    super(raw);
    this.c = new T5Config(raw);
    this.shared = this.module("shared", new Embedding(this.c.vocabSize, this.c.dModel));
    this.encoder = this.module("encoder", new T5Stack(this.c));
  }

  get numLayers(): number { return this.c.numLayers; }
  /** Relative positions: no length limit. */
  get maxPositions(): number { return Infinity; }
  protected override ignoredKeys(): RegExp[] { return [/^encoder\.embed_tokens\.weight$/]; }

  /** last_hidden_state float32 [B, L, d_model] of ids [B, L] (int64/int32 on the model's device). */
  encode(inputIds: Tensor): Tensor {
    if (inputIds.ndim !== 2) throw new RangeError(`T5EncoderModel: input ids must be [batch, length], got [${inputIds.shape}]`);
    const L = inputIds.shape[1];
    let x = this.shared.forward(inputIds);
    const bias = this.encoder.block.items[0].attention.SelfAttention.positionBias(L, inputIds.device);
    for (const block of this.encoder.block.items) x = block.forward(x, bias);
    return this.encoder.finalLayerNorm.forward(x);
  }

  /** PreTrainedModel's forward: for an encoder, last_hidden_state of `inputs.inputIds` (no cache, no mask). */
  forward(inputs: CausalLMInputs): Tensor {
    if (inputs.cache || inputs.attentionMask) throw new Error("T5EncoderModel: an encoder takes neither a KV cache nor an attention mask here");
    return this.encode(inputs.inputIds);
  }
}
