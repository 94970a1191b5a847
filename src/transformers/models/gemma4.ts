/**
 * Gemma 4, text (transformers' models/gemma4/modeling_gemma4.py: Gemma4ForCausalLM,
 * Gemma4ForConditionalGeneration + Gemma4TextConfig). Gemma 3's sandwich-normed decoder with:
 * - RMSNorms that scale by w (not 1 + w); q_norm/k_norm per head and a weightless v_norm; scores
 *   scaled by 1;
 * - sliding and full layers (`layer_types`); full layers have their own head size
 *   (`global_head_dim`), "proportional" rope, and with `attention_k_eq_v` their own KV-head count
 *   (`num_global_key_value_heads`) and values taken from k_proj (no v_proj);
 * - KV sharing: the last `num_kv_shared_layers` layers reuse the keys/values (whole sequence, after
 *   norm and rope) of the last earlier layer of their type, and with `use_double_wide_mlp` have
 *   an MLP twice as wide;
 * - per-layer inputs (`hidden_size_per_layer_input` > 0): a second embedding of the ids plus a
 *   projection of the embeddings give each layer a vector that gates a residual branch after its MLP;
 * - `enable_moe_block`: every layer runs the dense MLP and a mixture of experts side by side;
 * - each layer's output times `layer_scalar`; soft-capped logits.
 *
 *   x = embed_tokens(ids) * sqrt(H)
 *   per layer: x = x + post_attention_layernorm(attn(input_layernorm(x)))
 *              f = mlp(pre_feedforward_layernorm(x))       [MoE: post_ff_1(f) + post_ff_2(experts(pre_ff_2(x)))]
 *              x = x + post_feedforward_layernorm(f)
 *              x = x + post_per_layer_input_norm(per_layer_projection(act(per_layer_input_gate(x)) * pli_i))
 *              x = x * layer_scalar
 *   logits = cap * tanh(lm_head(norm(x)) / cap)
 */
import { attendToKeys, causalAttention } from "../../nn/attention.js";
import { FusedExperts } from "../../nn/fused_experts.js";
import { activation, type Activation } from "../../nn/activations.js";
import { Linear, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { Module, ModuleList, type Parameter } from "../../nn/module.js";
import { computeInvFreq, ropeCosSin, type RopeTables } from "../../nn/rotary.js";
import { unscaledRmsNorm } from "../../nn/unscaled_rms_norm.js";
import { add, applyRotary, div, embedding, mul, softmax, sum, tanh, topk } from "../../tensor/ops.js";
import { tidy } from "../../tensor/scope.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { LayerKVCache } from "../cache_utils.js";
import { LANGUAGE_MODEL_RENAME, wrappedTextConfig, type CheckpointLayout } from "../checkpoint_layout.js";
import { bool, ConfigError, num, ropeParameters, str, type RawConfig } from "../configuration.js";
import { PreTrainedModel, paddingMask, type CausalLMInputs } from "../modeling_utils.js";
import { GemmaTextScaledWordEmbedding } from "./gemma.js";

// ------------------------------------------------------------------ config

type LayerType = "sliding_attention" | "full_attention";

/** What differs between layers: head size, KV heads, window, rope, KV sharing, MLP width. */
interface Gemma4Layer {
  type: LayerType;
  headDim: number;
  numKvHeads: number;
  /** Sliding window in keys (0 = full attention). */
  window: number;
  /** Values come from k_proj (attention_k_eq_v on full layers). */
  kEqV: boolean;
  /** The earlier layer whose keys/values this layer reuses, or -1. */
  kvSource: number;
  /** Later layers reuse this layer's keys/values. */
  storesKv: boolean;
  intermediateSize: number;
}

/** Gemma4TextConfig fields with transformers' defaults, resolved per layer. */
export class Gemma4TextConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly hiddenAct: string;
  readonly maxPositionEmbeddings: number;
  readonly rmsNormEps: number;
  readonly tieWordEmbeddings: boolean;
  readonly attentionBias: boolean;
  /** 0 = no soft-capping. */
  readonly finalLogitSoftcapping: number;
  /** 0 = no per-layer inputs. */
  readonly hiddenSizePerLayerInput: number;
  readonly vocabSizePerLayerInput: number;
  readonly enableMoeBlock: boolean;
  readonly numExperts: number;
  readonly topKExperts: number;
  readonly moeIntermediateSize: number;
  readonly layers: Gemma4Layer[];
  readonly ropeByType: Record<LayerType, RopeTables>;

  constructor(raw: RawConfig) {
    this.vocabSize = num(raw, "vocab_size", 262144);
    this.hiddenSize = num(raw, "hidden_size", 2304);
    this.numHiddenLayers = num(raw, "num_hidden_layers", 30);
    this.numAttentionHeads = num(raw, "num_attention_heads", 8);
    this.hiddenAct = str(raw, "hidden_activation", "gelu_pytorch_tanh");
    this.maxPositionEmbeddings = num(raw, "max_position_embeddings", 131072);
    this.rmsNormEps = num(raw, "rms_norm_eps", 1e-6);
    this.tieWordEmbeddings = bool(raw, "tie_word_embeddings", true);
    this.attentionBias = bool(raw, "attention_bias", false);
    this.finalLogitSoftcapping = num(raw, "final_logit_softcapping", 0);
    this.hiddenSizePerLayerInput = num(raw, "hidden_size_per_layer_input", 256);
    this.vocabSizePerLayerInput = num(raw, "vocab_size_per_layer_input", 262144);
    this.enableMoeBlock = bool(raw, "enable_moe_block", false);
    this.numExperts = this.enableMoeBlock ? num(raw, "num_experts") : 0;
    this.topKExperts = this.enableMoeBlock ? num(raw, "top_k_experts") : 0;
    this.moeIntermediateSize = this.enableMoeBlock ? num(raw, "moe_intermediate_size") : 0;
    if (raw.use_bidirectional_attention === "all") {
      throw new ConfigError(`use_bidirectional_attention "all" is not supported (Gemma 4 is run as a causal LM)`);
    }
    const types = layerTypes(raw, this.numHiddenLayers);
    const headDim = num(raw, "head_dim", 256), globalHeadDim = num(raw, "global_head_dim", 512);
    const kvHeads = num(raw, "num_key_value_heads", 4);
    const kEqV = bool(raw, "attention_k_eq_v", false);
    // Full layers: num_global_key_value_heads applies only with attention_k_eq_v (Gemma4TextConfig.__post_init__).
    const globalKvHeads = kEqV ? num(raw, "num_global_key_value_heads", kvHeads) : kvHeads;
    // transformers writes the full layers' overrides as per_layer_config {"<layer>": {head_dim, num_key_value_heads}}.
    const perLayer = (raw.per_layer_config ?? {}) as Record<string, { head_dim?: number; num_key_value_heads?: number }>;
    const firstShared = this.numHiddenLayers - num(raw, "num_kv_shared_layers", 0);
    const intermediate = num(raw, "intermediate_size", 9216), doubleWide = bool(raw, "use_double_wide_mlp", false);
    const window = num(raw, "sliding_window", 512);
    this.layers = types.map((type, i) => {
      const full = type === "full_attention";
      const shared = i >= firstShared && firstShared > 0;
      const source = shared ? types.lastIndexOf(type, firstShared - 1) : -1;
      if (shared && source < 0) throw new ConfigError(`layer ${i} shares keys/values but no layer before ${firstShared} is ${type}`);
      return {
        type,
        headDim: perLayer[i]?.head_dim ?? (full ? globalHeadDim : headDim),
        numKvHeads: perLayer[i]?.num_key_value_heads ?? (full ? globalKvHeads : kvHeads),
        window: full ? 0 : window,
        kEqV: kEqV && full,
        kvSource: source,
        storesKv: !shared && i === types.lastIndexOf(type, firstShared - 1),
        intermediateSize: intermediate * (doubleWide && shared ? 2 : 1),
      };
    });
    const ropeDim = (t: LayerType) => this.layers.find((l) => l.type === t)?.headDim ?? headDim;
    const withRope = raw.rope_parameters ? raw : { ...raw, rope_parameters: DEFAULT_ROPE };
    const rope = (t: LayerType) => computeInvFreq(ropeParameters(withRope, 10_000, t), ropeDim(t));
    this.ropeByType = { sliding_attention: rope("sliding_attention"), full_attention: rope("full_attention") };
  }
}

/** Gemma4TextConfig's rope_parameters when config.json has none. */
const DEFAULT_ROPE: RawConfig = {
  sliding_attention: { rope_type: "default", rope_theta: 10_000 },
  full_attention: { rope_type: "proportional", partial_rotary_factor: 0.25, rope_theta: 1_000_000 },
};

/** `layer_types`, else 5 sliding then 1 full; the last layer is always full (as transformers forces it). */
function layerTypes(raw: RawConfig, n: number): LayerType[] {
  const types = Array.isArray(raw.layer_types)
    ? [...(raw.layer_types as LayerType[])]
    : Array.from({ length: n }, (_, i) => ((i + 1) % 6 ? "sliding_attention" : "full_attention") as LayerType);
  if (types.length !== n) throw new ConfigError(`config.json 'layer_types' has ${types.length} entries for ${n} layers`);
  const bad = types.find((t) => t !== "sliding_attention" && t !== "full_attention");
  if (bad !== undefined) throw new ConfigError(`unsupported layer type '${bad}' in layer_types; supported: sliding_attention, full_attention`);
  types[n - 1] = "full_attention";
  return types;
}

// ------------------------------------------------------------------ layers

/** Keys/values [B, Hkv, Lk, D] of the layer of each type that KV-sharing layers read. */
type SharedKV = Map<LayerType, { keys: Tensor; values: Tensor }>;

/** Gemma4TextAttention: x [B, L, H] -> [B, L, H]; KV-sharing layers have only q_proj, q_norm, o_proj. */
class Gemma4TextAttention extends Module {
  readonly q_proj: Linear;
  readonly q_norm: RMSNorm;
  readonly k_proj: Linear | null;
  readonly v_proj: Linear | null;
  readonly k_norm: RMSNorm | null;
  readonly o_proj: Linear;

  constructor(private readonly c: Gemma4TextConfig, private readonly l: Gemma4Layer) {
    super();
    const { hiddenSize: h, numAttentionHeads: nq, attentionBias: b, rmsNormEps: eps } = c;
    const { headDim: d, numKvHeads: nkv } = l;
    const owned = l.kvSource < 0;
    this.q_proj = this.module("q_proj", new Linear(h, nq * d, b));
    this.q_norm = this.module("q_norm", new RMSNorm(d, eps));
    this.k_proj = owned ? this.module("k_proj", new Linear(h, nkv * d, b)) : null;
    this.v_proj = owned && !l.kEqV ? this.module("v_proj", new Linear(h, nkv * d, b)) : null;
    this.k_norm = owned ? this.module("k_norm", new RMSNorm(d, eps)) : null;
    this.o_proj = this.module("o_proj", new Linear(nq * d, h, b));
  }

  /** Attention output; the keys/values used are stored in `shared` when later layers reuse them. */
  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null, shared: SharedKV): Tensor {
    const [B, L] = x.shape;
    const { headDim: d, numKvHeads: nkv, window } = this.l;
    const q = applyRotary(this.q_norm.forward(this.q_proj.forward(x).view(B, L, this.c.numAttentionHeads, d)), cos, sin);
    const o = { scale: 1, mask, window };
    if (!this.k_proj || !this.k_norm) {
      const kv = shared.get(this.l.type)!;
      return this.o_proj.forward(attendToKeys(q, kv.keys, kv.values, o));
    }
    const kRaw = this.k_proj.forward(x).view(B, L, nkv, d);
    const vRaw = this.v_proj ? this.v_proj.forward(x).view(B, L, nkv, d) : kRaw;
    const k = applyRotary(this.k_norm.forward(kRaw), cos, sin);
    const v = unscaledRmsNorm(vRaw, this.c.rmsNormEps);
    if (!this.l.storesKv) return this.o_proj.forward(causalAttention(q, k, v, cache, o));
    const kv = cache ? cache.update(k, v, window) : { keys: k.transpose(1, 2), values: v.transpose(1, 2) };
    shared.set(this.l.type, kv);
    return this.o_proj.forward(attendToKeys(q, kv.keys, kv.values, o));
  }
}

/** Gemma4TextRouter: proj of RMSNorm(x) * scale * H^-1/2 -> softmax -> top-k, renormalised, times per_expert_scale. */
class Gemma4TextRouter extends Module {
  readonly proj: Linear;
  readonly scale: Parameter;
  readonly per_expert_scale: Parameter;
  constructor(private readonly c: Gemma4TextConfig) {
    super();
    this.proj = this.module("proj", new Linear(c.hiddenSize, c.numExperts, false));
    this.scale = this.param("scale", [c.hiddenSize]);
    this.per_expert_scale = this.param("per_expert_scale", [c.numExperts]);
  }

  /** x [T, H] -> routing weights [T, k] float32 and expert indices [T, k] int64. */
  forward(x: Tensor): { weights: Tensor; indices: Tensor } {
    const h = mul(mul(unscaledRmsNorm(x, this.c.rmsNormEps), this.scale.value), this.c.hiddenSize ** -0.5);
    const { values, indices } = topk(softmax(this.proj.forward(h), -1), this.c.topKExperts);
    const normalised = div(values, sum(values, -1, true));
    const perExpert = embedding(indices, this.per_expert_scale.value.view(this.c.numExperts, 1)).squeeze(-1);
    return { weights: mul(normalised, perExpert), indices };
  }
}

class Gemma4TextDecoderLayer extends Module {
  readonly self_attn: Gemma4TextAttention;
  readonly mlp: GatedMLP;
  readonly input_layernorm: RMSNorm;
  readonly post_attention_layernorm: RMSNorm;
  readonly pre_feedforward_layernorm: RMSNorm;
  readonly post_feedforward_layernorm: RMSNorm;
  readonly layer_scalar: Parameter;
  readonly per_layer_input_gate: Linear | null = null;
  readonly per_layer_projection: Linear | null = null;
  readonly post_per_layer_input_norm: RMSNorm | null = null;
  readonly router: Gemma4TextRouter | null = null;
  readonly experts: FusedExperts | null = null;
  readonly post_feedforward_layernorm_1: RMSNorm | null = null;
  readonly post_feedforward_layernorm_2: RMSNorm | null = null;
  readonly pre_feedforward_layernorm_2: RMSNorm | null = null;
  private readonly act: Activation;

  constructor(c: Gemma4TextConfig, l: Gemma4Layer) {
    super();
    const h = c.hiddenSize, norm = (dim = h) => new RMSNorm(dim, c.rmsNormEps);
    this.self_attn = this.module("self_attn", new Gemma4TextAttention(c, l));
    this.mlp = this.module("mlp", new GatedMLP(h, l.intermediateSize, c.hiddenAct));
    this.input_layernorm = this.module("input_layernorm", norm());
    this.post_attention_layernorm = this.module("post_attention_layernorm", norm());
    this.pre_feedforward_layernorm = this.module("pre_feedforward_layernorm", norm());
    this.post_feedforward_layernorm = this.module("post_feedforward_layernorm", norm());
    this.layer_scalar = this.param("layer_scalar", [1]);
    this.act = activation(c.hiddenAct);
    const p = c.hiddenSizePerLayerInput;
    if (p) {
      this.per_layer_input_gate = this.module("per_layer_input_gate", new Linear(h, p, false));
      this.per_layer_projection = this.module("per_layer_projection", new Linear(p, h, false));
      this.post_per_layer_input_norm = this.module("post_per_layer_input_norm", norm());
    }
    if (c.enableMoeBlock) {
      this.router = this.module("router", new Gemma4TextRouter(c));
      this.experts = this.module("experts", new FusedExperts(c.numExperts, h, c.moeIntermediateSize, c.hiddenAct));
      this.post_feedforward_layernorm_1 = this.module("post_feedforward_layernorm_1", norm());
      this.post_feedforward_layernorm_2 = this.module("post_feedforward_layernorm_2", norm());
      this.pre_feedforward_layernorm_2 = this.module("pre_feedforward_layernorm_2", norm());
    }
  }

  /** x [B, L, H]; perLayerInput [B, L, P] or null; cos/sin of this layer's type -> [B, L, H]. */
  forward(x: Tensor, perLayerInput: Tensor | null, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null, shared: SharedKV): Tensor {
    const attn = this.self_attn.forward(this.input_layernorm.forward(x), cos, sin, mask, cache, shared);
    let h = add(x, this.post_attention_layernorm.forward(attn));
    let ff = this.mlp.forward(this.pre_feedforward_layernorm.forward(h));
    if (this.router && this.experts) ff = add(this.post_feedforward_layernorm_1!.forward(ff), this.moe(h));
    h = add(h, this.post_feedforward_layernorm.forward(ff));
    if (perLayerInput && this.per_layer_input_gate && this.per_layer_projection) {
      const gated = mul(this.act(this.per_layer_input_gate.forward(h)), perLayerInput);
      h = add(h, this.post_per_layer_input_norm!.forward(this.per_layer_projection.forward(gated)));
    }
    return mul(h, this.layer_scalar.value);
  }

  /** The expert branch: routed on the residual, experts on pre_feedforward_layernorm_2 of it. */
  private moe(residual: Tensor): Tensor {
    const [B, L, H] = residual.shape;
    const flat = residual.reshape(B * L, H);
    const { weights, indices } = this.router!.forward(flat);
    const out = this.experts!.forward(this.pre_feedforward_layernorm_2!.forward(flat), weights, indices);
    return this.post_feedforward_layernorm_2!.forward(out.view(B, L, H));
  }
}

/** Gemma4TextModel: `model.*` (embeddings, per-layer-input tables, layers, final norm). */
class Gemma4TextModel extends Module {
  readonly embed_tokens: GemmaTextScaledWordEmbedding;
  readonly layers: ModuleList<Gemma4TextDecoderLayer>;
  readonly norm: RMSNorm;
  readonly embed_tokens_per_layer: GemmaTextScaledWordEmbedding | null = null;
  readonly per_layer_model_projection: Linear | null = null;
  readonly per_layer_projection_norm: RMSNorm | null = null;

  constructor(private readonly c: Gemma4TextConfig) {
    super();
    const h = c.hiddenSize, n = c.numHiddenLayers, p = c.hiddenSizePerLayerInput;
    this.embed_tokens = this.module("embed_tokens", new GemmaTextScaledWordEmbedding(c.vocabSize, h, h ** 0.5));
    this.layers = this.module("layers", new ModuleList(c.layers.map((l) => new Gemma4TextDecoderLayer(c, l))));
    this.norm = this.module("norm", new RMSNorm(h, c.rmsNormEps));
    if (p) {
      this.embed_tokens_per_layer = this.module("embed_tokens_per_layer", new GemmaTextScaledWordEmbedding(c.vocabSizePerLayerInput, n * p, p ** 0.5));
      this.per_layer_model_projection = this.module("per_layer_model_projection", new Linear(h, n * p, false));
      this.per_layer_projection_norm = this.module("per_layer_projection_norm", new RMSNorm(p, c.rmsNormEps));
    }
  }

  /**
   * Per-layer inputs [B, L, layers, P] (get_per_layer_inputs + project_per_layer_inputs):
   * (RMSNorm(per_layer_model_projection(embeds) * H^-1/2) + embed_tokens_per_layer(ids)) * 2^-1/2.
   */
  perLayerInputs(ids: Tensor, embeds: Tensor): Tensor | null {
    if (!this.embed_tokens_per_layer || !this.per_layer_model_projection || !this.per_layer_projection_norm) return null;
    const [B, L] = ids.shape, n = this.c.numHiddenLayers, p = this.c.hiddenSizePerLayerInput;
    const tokens = this.embed_tokens_per_layer.forward(ids).view(B, L, n, p);
    const projected = mul(this.per_layer_model_projection.forward(embeds), this.c.hiddenSize ** -0.5).view(B, L, n, p);
    return mul(add(this.per_layer_projection_norm.forward(projected), tokens), 2 ** -0.5);
  }
}

// ------------------------------------------------------------------ causal LM

/** Gemma4ForCausalLM (model_type gemma4_text): forward(inputs) -> float32 soft-capped logits [B, L', vocab]. */
export class Gemma4ForCausalLM extends PreTrainedModel {
  readonly c: Gemma4TextConfig;
  readonly model: Gemma4TextModel;
  readonly lm_head: Linear;

  constructor(raw: RawConfig) {
    super(raw);
    this.c = new Gemma4TextConfig(raw);
    this.model = this.module("model", new Gemma4TextModel(this.c));
    this.lm_head = this.module("lm_head", new Linear(this.c.hiddenSize, this.c.vocabSize, false));
  }

  get numLayers(): number { return this.c.numHiddenLayers; }
  get maxPositions(): number { return this.c.maxPositionEmbeddings; }
  protected override tiedWeights(): Record<string, string> {
    return this.c.tieWordEmbeddings ? { "lm_head.weight": "model.embed_tokens.weight" } : {};
  }
  /** KV-sharing layers have no k/v weights; transformers ignores them where a file has them. */
  protected override checkpointLayout(): CheckpointLayout | null {
    return { skip: [this.sharedKvWeights("model.")], fuseExperts: this.c.enableMoeBlock };
  }

  /** Names of k_proj/v_proj/k_norm/v_norm of the KV-sharing layers under `prefix` (matches nothing when none share). */
  protected sharedKvWeights(prefix: string): RegExp {
    const shared = this.c.layers.flatMap((l, i) => (l.kvSource >= 0 ? [i] : []));
    return new RegExp(`^${prefix.replaceAll(".", "\\.")}layers\\.(${shared.join("|") || "(?!)"})\\.self_attn\\.(k_proj|v_proj|k_norm|v_norm)\\.`);
  }

  forward({ inputIds, positionIds, attentionMask, cache, logitsToKeep = 0 }: CausalLMInputs): Tensor {
    const rope = new Map<LayerType, { cos: Tensor; sin: Tensor }>();
    for (const [type, t] of Object.entries(this.c.ropeByType)) rope.set(type as LayerType, ropeCosSin(t, positionIds, this.device));
    const mask = paddingMask(attentionMask, this.device);
    const shared: SharedKV = new Map();
    let x = this.model.embed_tokens.forward(inputIds);
    const perLayer = this.model.perLayerInputs(inputIds, x);
    this.model.layers.items.forEach((layer, i) => {
      const { cos, sin } = rope.get(this.c.layers[i].type)!;
      const input = x, pli = perLayer?.select(2, i) ?? null;
      x = tidy(() => {
        const out = layer.forward(input, pli, cos, sin, mask, cache?.layers[i] ?? null, shared);
        // Keys/values that later layers share must outlive this layer's scope.
        const kv = this.c.layers[i].storesKv ? shared.get(this.c.layers[i].type)! : null;
        return { out, keys: kv?.keys ?? null, values: kv?.values ?? null };
      }).out;
    });
    const L = x.shape[1];
    if (logitsToKeep > 0 && logitsToKeep < L) x = x.narrow(1, L - logitsToKeep, logitsToKeep);
    const logits = this.lm_head.forward(this.model.norm.forward(x));
    const cap = this.c.finalLogitSoftcapping;
    return cap ? mul(tanh(div(logits, cap)), cap) : logits;
  }
}

/**
 * Gemma4ForConditionalGeneration, as google/gemma-4-* ship it, run for text generation: the text
 * config is `text_config`, the language model's weights come from `model.language_model.*`; the
 * vision and audio towers and their embedders (`model.vision_tower.*`, `model.embed_vision.*`,
 * `model.audio_tower.*`, `model.embed_audio.*`) are skipped knowingly. lm_head is tied.
 */
export class Gemma4ForConditionalGeneration extends Gemma4ForCausalLM {
  constructor(raw: RawConfig) {
    super(wrappedTextConfig(raw));
  }
  protected override checkpointLayout(): CheckpointLayout {
    return {
      renames: [LANGUAGE_MODEL_RENAME],
      skip: ["model.vision_tower.", "model.embed_vision.", "model.audio_tower.", "model.embed_audio.", this.sharedKvWeights("model.language_model.")],
      fuseExperts: this.c.enableMoeBlock,
    };
  }
}
