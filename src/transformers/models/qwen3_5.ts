/**
 * Qwen3.5, text model (transformers' models/qwen3_5/modeling_qwen3_5.py: Qwen3_5ForCausalLM +
 * Qwen3_5TextConfig, and the text path of the Hub's Qwen3_5ForConditionalGeneration), a hybrid: `layer_types` mixes Gated DeltaNet linear attention
 * (`linear_attn`) with gated full attention (`self_attn`, partial rotary, q/k norms, output gate).
 *
 *   embed_tokens -> N x [x + mixer(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 *
 * Every RMSNorm here but the gated one scales by (1 + weight). The Gated DeltaNet layers carry a
 * conv and a recurrent state in the cache (KVCache.linearAttention) instead of keys and values.
 */
import { causalAttention } from "../../nn/attention.js";
import { activation, type Activation } from "../../nn/activations.js";
import { causalConv1d, gatedDeltaRule, RMSNormGated } from "../../nn/gated_deltanet.js";
import { Embedding, Linear, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { Module, ModuleList, type Parameter } from "../../nn/module.js";
import { computeInvFreq, ropeCosSin, type RopeTables } from "../../nn/rotary.js";
import { fromBytes } from "../../tensor/creation.js";
import { encode } from "../../tensor/host.js";
import { add, applyRotary, exp, mul, neg, sigmoid, softplus } from "../../tensor/ops.js";
import { keep, tidy } from "../../tensor/scope.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { Device } from "../../devices/device.js";
import type { KVCache, LayerKVCache } from "../cache_utils.js";
import type { LinearAttentionState } from "../cache_linear_attention.js";
import { bool, num, ropeParameters, str, type RawConfig } from "../configuration.js";
import { LANGUAGE_MODEL_RENAME, wrappedTextConfig, type CheckpointLayout } from "../checkpoint_layout.js";
import type { TensorModule } from "../decoder_lm.js";
import { PreTrainedModel, paddingMask, type CausalLMInputs } from "../modeling_utils.js";

// ------------------------------------------------------------------ config

export type Qwen3_5LayerType = "linear_attention" | "full_attention";

/** Qwen3_5TextConfig fields with transformers' defaults. */
export class Qwen3_5TextConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly hiddenAct: string;
  readonly maxPositionEmbeddings: number;
  readonly rmsNormEps: number;
  readonly tieWordEmbeddings: boolean;
  readonly attentionBias: boolean;
  readonly linearConvKernelDim: number;
  readonly linearKeyHeadDim: number;
  readonly linearValueHeadDim: number;
  readonly linearNumKeyHeads: number;
  readonly linearNumValueHeads: number;
  readonly layerTypes: Qwen3_5LayerType[];
  readonly rope: RopeTables;

  constructor(raw: RawConfig) {
    this.vocabSize = num(raw, "vocab_size", 248320);
    this.hiddenSize = num(raw, "hidden_size", 4096);
    this.intermediateSize = num(raw, "intermediate_size", 12288);
    this.numHiddenLayers = num(raw, "num_hidden_layers", 32);
    this.numAttentionHeads = num(raw, "num_attention_heads", 16);
    this.numKeyValueHeads = num(raw, "num_key_value_heads", 4);
    this.headDim = num(raw, "head_dim", 256);
    this.hiddenAct = str(raw, "hidden_act", "silu");
    this.maxPositionEmbeddings = num(raw, "max_position_embeddings", 32768);
    this.rmsNormEps = num(raw, "rms_norm_eps", 1e-6);
    this.tieWordEmbeddings = bool(raw, "tie_word_embeddings", false);
    this.attentionBias = bool(raw, "attention_bias", false);
    this.linearConvKernelDim = num(raw, "linear_conv_kernel_dim", 4);
    this.linearKeyHeadDim = num(raw, "linear_key_head_dim", 128);
    this.linearValueHeadDim = num(raw, "linear_value_head_dim", 128);
    this.linearNumKeyHeads = num(raw, "linear_num_key_heads", 16);
    this.linearNumValueHeads = num(raw, "linear_num_value_heads", 32);
    // Default: every full_attention_interval-th layer (4) is full attention.
    const interval = num(raw, "full_attention_interval", 4);
    this.layerTypes = Array.isArray(raw.layer_types)
      ? (raw.layer_types as Qwen3_5LayerType[])
      : Array.from({ length: this.numHiddenLayers }, (_, i) => ((i + 1) % interval ? "linear_attention" : "full_attention"));
    for (const t of this.layerTypes) {
      if (t !== "linear_attention" && t !== "full_attention") throw new Error(`unsupported Qwen3.5 layer type '${t}'; supported: linear_attention, full_attention`);
    }
    // Text positions are the same on every mrope axis, so mrope reduces to plain (partial) rope.
    const rope = ropeParameters(raw);
    this.rope = computeInvFreq({ ...rope, partial_rotary_factor: rope.partial_rotary_factor ?? 0.25 }, this.headDim);
  }
}

// ------------------------------------------------------------------ layers

/** Full attention with an output gate: q_proj yields each head's query and gate (Qwen3_5Attention). */
class Qwen3_5Attention extends Module {
  readonly q_proj: Linear;
  readonly k_proj: Linear;
  readonly v_proj: Linear;
  readonly o_proj: Linear;
  readonly q_norm: RMSNorm;
  readonly k_norm: RMSNorm;
  constructor(private readonly c: Qwen3_5TextConfig) {
    super();
    const { hiddenSize: h, numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d, attentionBias: b } = c;
    this.q_proj = this.module("q_proj", new Linear(h, nq * d * 2, b));
    this.k_proj = this.module("k_proj", new Linear(h, nkv * d, b));
    this.v_proj = this.module("v_proj", new Linear(h, nkv * d, b));
    this.o_proj = this.module("o_proj", new Linear(nq * d, h, b));
    this.q_norm = this.module("q_norm", new RMSNorm(d, c.rmsNormEps, 1));
    this.k_norm = this.module("k_norm", new RMSNorm(d, c.rmsNormEps, 1));
  }

  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor {
    const [B, L] = x.shape;
    const { numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d } = this.c;
    const qg = this.q_proj.forward(x).view(B, L, nq, 2 * d);
    const gate = qg.narrow(3, d, d).reshape(B, L, nq * d);
    const q = applyRotary(this.q_norm.forward(qg.narrow(3, 0, d)), cos, sin);
    const k = applyRotary(this.k_norm.forward(this.k_proj.forward(x).view(B, L, nkv, d)), cos, sin);
    const v = this.v_proj.forward(x).view(B, L, nkv, d);
    const out = causalAttention(q, k, v, cache, { scale: d ** -0.5, mask });
    return this.o_proj.forward(mul(out, sigmoid(gate)));
  }
}

/** Gated DeltaNet linear attention (Qwen3_5GatedDeltaNet). */
class Qwen3_5GatedDeltaNet extends Module {
  readonly in_proj_qkv: Linear;
  readonly in_proj_z: Linear;
  readonly in_proj_b: Linear;
  readonly in_proj_a: Linear;
  readonly conv1d: Conv1dWeight;
  readonly dt_bias: Parameter;
  readonly A_log: Parameter;
  readonly norm: RMSNormGated;
  readonly out_proj: Linear;
  private readonly act: Activation;
  private readonly keyDim: number;
  private readonly valueDim: number;

  constructor(private readonly c: Qwen3_5TextConfig) {
    super();
    const h = c.hiddenSize, nv = c.linearNumValueHeads;
    this.keyDim = c.linearKeyHeadDim * c.linearNumKeyHeads;
    this.valueDim = c.linearValueHeadDim * nv;
    const convDim = 2 * this.keyDim + this.valueDim;
    this.in_proj_qkv = this.module("in_proj_qkv", new Linear(h, convDim, false));
    this.in_proj_z = this.module("in_proj_z", new Linear(h, this.valueDim, false));
    this.in_proj_b = this.module("in_proj_b", new Linear(h, nv, false));
    this.in_proj_a = this.module("in_proj_a", new Linear(h, nv, false));
    this.conv1d = this.module("conv1d", new Conv1dWeight(convDim, c.linearConvKernelDim));
    this.dt_bias = this.param("dt_bias", [nv]);
    this.A_log = this.param("A_log", [nv]);
    this.norm = this.module("norm", new RMSNormGated(c.linearValueHeadDim, c.rmsNormEps));
    this.out_proj = this.module("out_proj", new Linear(this.valueDim, h, false));
    this.act = activation(c.hiddenAct);
  }

  /** x [B, L, hidden]; mask [B, L, 1] (1 = token, 0 = padding) or null; state: this layer's cached state. */
  forward(x: Tensor, mask: Tensor | null, state: LinearAttentionState | null): Tensor {
    if (mask) x = mul(x, mask); // apply_mask_to_padding_states: padding never enters the state
    const [B, L] = x.shape;
    const { linearNumKeyHeads: nk, linearNumValueHeads: nv, linearKeyHeadDim: dk, linearValueHeadDim: dv } = this.c;
    // The projection, conv and q/k normalisation temporaries ([L, conv channels] each) are freed as
    // soon as the recurrence has run (a nested memory scope), before the output gate's are made.
    const mixed = tidy(() => {
      const conv = causalConv1d(this.in_proj_qkv.forward(x), this.conv1d.weight.value, state?.conv ?? null);
      const qkv = this.act(conv.out);
      const repeat = (t: Tensor) => t.view(B, L, nk, 1, dk).expand(B, L, nk, nv / nk, dk).reshape(B, L, nv, dk); // repeat_interleave over heads
      const q = repeat(qkv.narrow(2, 0, this.keyDim));
      const k = repeat(qkv.narrow(2, this.keyDim, this.keyDim));
      const v = qkv.narrow(2, 2 * this.keyDim, this.valueDim).reshape(B, L, nv, dv);
      const beta = sigmoid(this.in_proj_b.forward(x));
      const g = mul(neg(exp(this.A_log.value.to("float32"))), softplus(add(this.in_proj_a.forward(x), this.dt_bias.value)));
      const rule = gatedDeltaRule(q, k, v, g, beta, state?.recurrent ?? null);
      return { out: rule.out, recurrent: rule.state, conv: conv.state };
    });
    if (state) {
      state.conv = keep(mixed.conv);
      state.recurrent = keep(mixed.recurrent);
    }
    const rule = mixed;
    const z = this.in_proj_z.forward(x).view(B, L, nv, dv);
    return this.out_proj.forward(this.norm.forward(rule.out, z).reshape(B, L, this.valueDim));
  }
}

/** The weight [channels, 1, kernel] of a depthwise nn.Conv1d without bias (applied by causalConv1d). */
class Conv1dWeight extends Module {
  readonly weight: Parameter;
  constructor(channels: number, kernel: number) {
    super();
    this.weight = this.param("weight", [channels, 1, kernel]);
  }
}

/** What a decoder layer reads besides its input: rotary tables, masks and the cache. */
interface LayerContext {
  cos: Tensor;
  sin: Tensor;
  /** Additive padding mask for full attention, or null. */
  mask: Tensor | null;
  /** [B, L, 1] zeros at padding for linear attention, or null. */
  linearMask: Tensor | null;
  cache: KVCache | null;
}

/** The feed-forward block of layer `layerIdx` (Qwen3.5: a gated MLP; Qwen3.5-MoE: experts plus a shared expert). */
export type Qwen3_5MlpFactory = (layerIdx: number) => TensorModule;

class Qwen3_5DecoderLayer extends Module {
  readonly linear_attn: Qwen3_5GatedDeltaNet | null;
  readonly self_attn: Qwen3_5Attention | null;
  readonly mlp: TensorModule;
  readonly input_layernorm: RMSNorm;
  readonly post_attention_layernorm: RMSNorm;
  constructor(c: Qwen3_5TextConfig, private readonly layerIdx: number, mlp: TensorModule) {
    super();
    const linear = c.layerTypes[layerIdx] === "linear_attention";
    this.linear_attn = linear ? this.module("linear_attn", new Qwen3_5GatedDeltaNet(c)) : null;
    this.self_attn = linear ? null : this.module("self_attn", new Qwen3_5Attention(c));
    this.mlp = this.module("mlp", mlp);
    this.input_layernorm = this.module("input_layernorm", new RMSNorm(c.hiddenSize, c.rmsNormEps, 1));
    this.post_attention_layernorm = this.module("post_attention_layernorm", new RMSNorm(c.hiddenSize, c.rmsNormEps, 1));
  }

  forward(x: Tensor, o: LayerContext): Tensor {
    // The mixer's temporaries are freed before the MLP's are made (a nested memory scope).
    const h = tidy(() => {
      const normed = this.input_layernorm.forward(x);
      const mixed = this.linear_attn
        ? this.linear_attn.forward(normed, o.linearMask, o.cache?.linearAttention(this.layerIdx) ?? null)
        : this.self_attn!.forward(normed, o.cos, o.sin, o.mask, o.cache?.layers[this.layerIdx] ?? null);
      return add(x, mixed);
    });
    return add(h, this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }
}

class Qwen3_5TextModel extends Module {
  readonly embed_tokens: Embedding;
  readonly layers: ModuleList<Qwen3_5DecoderLayer>;
  readonly norm: RMSNorm;
  constructor(c: Qwen3_5TextConfig, makeMlp: Qwen3_5MlpFactory) {
    super();
    this.embed_tokens = this.module("embed_tokens", new Embedding(c.vocabSize, c.hiddenSize));
    this.layers = this.module("layers", new ModuleList(Array.from({ length: c.numHiddenLayers }, (_, i) => new Qwen3_5DecoderLayer(c, i, makeMlp(i)))));
    this.norm = this.module("norm", new RMSNorm(c.hiddenSize, c.rmsNormEps, 1));
  }
}

/**
 * The padding mask of linear-attention layers [B, L, 1] float32 (1 = token, 0 = padding) over the
 * last L positions, or null when nothing there is padding (create_recurrent_attention_mask).
 */
function linearAttentionMask(attentionMask: number[][] | null, L: number, device: Device): Tensor | null {
  const rows = attentionMask?.map((r) => r.slice(-L));
  if (!rows || rows.every((r) => r.every((m) => m))) return null;
  return fromBytes(encode(rows.flat().map((m) => (m ? 1 : 0)), "float32"), "float32", [rows.length, L, 1], device);
}

// ------------------------------------------------------------------ causal LM

export class Qwen3_5ForCausalLM extends PreTrainedModel {
  readonly c: Qwen3_5TextConfig;
  readonly model: Qwen3_5TextModel;
  readonly lm_head: Linear;

  /**
   * `c` and `makeMlp`: a derived family's config and feed-forward block (Qwen3.5-MoE); by default
   * Qwen3_5MLP, the dense gated MLP.
   */
  constructor(raw: RawConfig, c = new Qwen3_5TextConfig(raw), makeMlp: Qwen3_5MlpFactory = () => new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct)) {
    super(raw);
    this.c = c;
    this.model = this.module("model", new Qwen3_5TextModel(c, makeMlp));
    this.lm_head = this.module("lm_head", new Linear(this.c.hiddenSize, this.c.vocabSize, false));
  }

  get numLayers(): number { return this.c.numHiddenLayers; }
  get maxPositions(): number { return this.c.maxPositionEmbeddings; }
  protected override tiedWeights(): Record<string, string> {
    return this.c.tieWordEmbeddings ? { "lm_head.weight": "model.embed_tokens.weight" } : {};
  }
  /** The multi-token-prediction layers (`mtp.*`) of Qwen3.5 Hub files are not used (transformers skips them too). */
  protected override checkpointLayout(): CheckpointLayout | null {
    return { skip: ["mtp."] };
  }

  forward({ inputIds, positionIds, attentionMask, cache, logitsToKeep = 0 }: CausalLMInputs): Tensor {
    const { cos, sin } = ropeCosSin(this.c.rope, positionIds, this.device);
    const L = inputIds.shape[1];
    const ctx: LayerContext = {
      cos, sin, cache,
      mask: paddingMask(attentionMask, this.device),
      linearMask: L > 1 ? linearAttentionMask(attentionMask, L, this.device) : null,
    };
    let x = this.model.embed_tokens.forward(inputIds);
    for (const layer of this.model.layers.items) {
      const input = x;
      x = tidy(() => layer.forward(input, ctx)); // each layer's temporaries are freed when it returns
    }
    if (logitsToKeep > 0 && logitsToKeep < L) x = x.narrow(1, L - logitsToKeep, logitsToKeep);
    return this.lm_head.forward(this.model.norm.forward(x));
  }
}

/**
 * Qwen3_5ForConditionalGeneration, as Qwen/Qwen3.5-* ship it, run for text generation: the text
 * config is `text_config`, the language model's weights are read from `model.language_model.*`,
 * `lm_head` stays at the root; the vision tower (`model.visual.*`) and the MTP layers (`mtp.*`) are
 * skipped knowingly.
 */
export class Qwen3_5ForConditionalGeneration extends Qwen3_5ForCausalLM {
  constructor(raw: RawConfig) {
    super(wrappedTextConfig(raw));
  }
  protected override checkpointLayout(): CheckpointLayout {
    return { renames: [LANGUAGE_MODEL_RENAME], skip: ["model.visual.", "mtp."] };
  }
}
