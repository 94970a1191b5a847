/**
 * GLM-4.5 / GLM-4-MoE (transformers' models/glm4_moe/modeling_glm4_moe.py + configuration_glm4_moe.py):
 * Llama's decoder with q/k/v biases (none on o_proj), per-head q_norm/k_norm before rotary
 * (`use_qk_norm`), partial rotary (the first head_dim * partial_rotary_factor dims, default 0.5),
 * a dense gated MLP in the first `first_k_dense_replace` layers and DeepSeek-V3's group-limited
 * mixture of experts with a shared expert in the others (nn/group_limited_moe.ts).
 *
 *   embed_tokens -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 *
 * The Hub files' multi-token-prediction layer (model.layers.{num_hidden_layers}.*) is skipped by name.
 */
import { RotaryAttention, type RotaryAttentionOptions } from "../../nn/attention.js";
import { GroupLimitedMoe, groupLimitedMoeOptions } from "../../nn/group_limited_moe.js";
import { Embedding, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { bool, num, withDefaults, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel, PreNormDecoderLayer } from "../decoder_lm.js";
import { mtpLayerKeys } from "../skipped_weights.js";
import { LlamaConfig } from "./llama.js";

// ------------------------------------------------------------------ config

/** transformers' Glm4MoeConfig defaults where they differ from Llama's. */
const GLM4_MOE_DEFAULTS: RawConfig = {
  vocab_size: 151552, hidden_size: 4096, intermediate_size: 10944, num_hidden_layers: 46, num_attention_heads: 96,
  num_key_value_heads: 8, max_position_embeddings: 131072, rms_norm_eps: 1e-5, partial_rotary_factor: 0.5,
};

/** Glm4MoeConfig: Llama's fields plus qk-norm and the expert fields. */
export class Glm4MoeConfig extends LlamaConfig {
  readonly useQkNorm: boolean;
  readonly firstKDenseReplace: number;
  readonly nRoutedExperts: number;
  readonly nSharedExperts: number;
  readonly numExpertsPerTok: number;
  readonly moeIntermediateSize: number;
  readonly nGroup: number;
  readonly topkGroup: number;
  readonly normTopkProb: boolean;
  readonly routedScalingFactor: number;

  constructor(raw: RawConfig) {
    const r = withDefaults(raw, GLM4_MOE_DEFAULTS);
    super(r);
    this.useQkNorm = bool(r, "use_qk_norm", false);
    this.firstKDenseReplace = num(r, "first_k_dense_replace", 1);
    this.nRoutedExperts = num(r, "n_routed_experts", num(r, "num_local_experts", 128));
    this.nSharedExperts = num(r, "n_shared_experts", 1);
    this.numExpertsPerTok = num(r, "num_experts_per_tok", 8);
    this.moeIntermediateSize = num(r, "moe_intermediate_size", 1408);
    this.nGroup = num(r, "n_group", 1);
    this.topkGroup = num(r, "topk_group", 1);
    this.normTopkProb = bool(r, "norm_topk_prob", true);
    this.routedScalingFactor = num(r, "routed_scaling_factor", 1);
  }

  override attention(layerIdx: number): RotaryAttentionOptions {
    const qkNorm = this.useQkNorm ? { qkNormEps: this.rmsNormEps } : {};
    return { ...super.attention(layerIdx), qkvBias: this.attentionBias, oBias: false, ...qkNorm };
  }
}

// ------------------------------------------------------------------ layers

/** Glm4MoeDecoderLayer: a dense MLP in the first first_k_dense_replace layers, Glm4MoeMoE after. */
function glm4MoeDecoderLayer(c: Glm4MoeConfig, layerIdx: number): PreNormDecoderLayer {
  return new PreNormDecoderLayer(
    new RotaryAttention(c.attention(layerIdx)),
    layerIdx >= c.firstKDenseReplace
      ? new GroupLimitedMoe(groupLimitedMoeOptions(c))
      : new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
  );
}

// ------------------------------------------------------------------ causal LM

export class Glm4MoeForCausalLM extends DecoderLM<Glm4MoeConfig, PreNormDecoderLayer> {
  constructor(raw: RawConfig, c: Glm4MoeConfig = new Glm4MoeConfig(raw)) {
    super(raw, c, new DecoderModel(
      new Embedding(c.vocabSize, c.hiddenSize),
      Array.from({ length: c.numHiddenLayers }, (_, i) => glm4MoeDecoderLayer(c, i)),
      new RMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }

  protected override ignoredKeys(): RegExp[] {
    return [...super.ignoredKeys(), mtpLayerKeys(this.config)];
  }
}
