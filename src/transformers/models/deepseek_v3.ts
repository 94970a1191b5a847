/**
 * DeepSeek-V3 (transformers' models/deepseek_v3/modeling_deepseek_v3.py + configuration_deepseek_v3.py):
 * multi-head latent attention (nn/latent_attention.ts: q/kv LoRA ranks, decoupled rope on
 * qk_rope_head_dim dims, the KV cache holding the compressed latent), a dense gated MLP in the first
 * `first_k_dense_replace` layers and a group-limited mixture of experts with shared experts and
 * routed scaling after them (nn/group_limited_moe.ts).
 *
 *   embed_tokens -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 *
 * The Hub files' multi-token-prediction layer (model.layers.{num_hidden_layers}.*) is skipped by
 * name. Their FP8 weights (`weight_scale_inv`) are not supported: load a bf16 conversion.
 */
import { GroupLimitedMoe, groupLimitedMoeOptions } from "../../nn/group_limited_moe.js";
import { MultiHeadLatentAttention, type LatentAttentionOptions } from "../../nn/latent_attention.js";
import { Embedding, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { computeInvFreq, type RopeParameters, type RopeTables } from "../../nn/rotary.js";
import { bool, num, ropeParameters, str, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel, PreNormDecoderLayer, type DecoderLMConfig } from "../decoder_lm.js";
import { mtpLayerKeys } from "../skipped_weights.js";

// ------------------------------------------------------------------ config

/** DeepseekV3Config fields with transformers' defaults. */
export class DeepseekV3Config implements DecoderLMConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly moeIntermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly nSharedExperts: number;
  readonly nRoutedExperts: number;
  readonly routedScalingFactor: number;
  readonly kvLoraRank: number;
  readonly qLoraRank: number | null;
  readonly qkRopeHeadDim: number;
  readonly vHeadDim: number;
  readonly qkNopeHeadDim: number;
  readonly nGroup: number;
  readonly topkGroup: number;
  readonly numExpertsPerTok: number;
  readonly firstKDenseReplace: number;
  readonly normTopkProb: boolean;
  readonly hiddenAct: string;
  readonly maxPositionEmbeddings: number;
  readonly rmsNormEps: number;
  readonly tieWordEmbeddings: boolean;
  readonly ropeInterleave: boolean;
  readonly attentionBias: boolean;
  readonly rope: RopeTables;
  /** Softmax scale: qk_head_dim^-0.5, times yarn_get_mscale(factor, mscale_all_dim)^2 for scaled rope. */
  readonly scale: number;

  constructor(raw: RawConfig) {
    this.vocabSize = num(raw, "vocab_size", 129280);
    this.hiddenSize = num(raw, "hidden_size", 7168);
    this.intermediateSize = num(raw, "intermediate_size", 18432);
    this.moeIntermediateSize = num(raw, "moe_intermediate_size", 2048);
    this.numHiddenLayers = num(raw, "num_hidden_layers", 61);
    this.numAttentionHeads = num(raw, "num_attention_heads", 128);
    this.nSharedExperts = num(raw, "n_shared_experts", 1);
    this.nRoutedExperts = num(raw, "n_routed_experts", 256);
    this.routedScalingFactor = num(raw, "routed_scaling_factor", 2.5);
    this.kvLoraRank = num(raw, "kv_lora_rank", 512);
    this.qLoraRank = raw.q_lora_rank === null ? null : num(raw, "q_lora_rank", 1536);
    this.qkRopeHeadDim = num(raw, "qk_rope_head_dim", 64);
    this.vHeadDim = num(raw, "v_head_dim", 128);
    this.qkNopeHeadDim = num(raw, "qk_nope_head_dim", 128);
    this.nGroup = num(raw, "n_group", 8);
    this.topkGroup = num(raw, "topk_group", 4);
    this.numExpertsPerTok = num(raw, "num_experts_per_tok", 8);
    this.firstKDenseReplace = num(raw, "first_k_dense_replace", 3);
    this.normTopkProb = bool(raw, "norm_topk_prob", true);
    this.hiddenAct = str(raw, "hidden_act", "silu");
    this.maxPositionEmbeddings = num(raw, "max_position_embeddings", 4096);
    this.rmsNormEps = num(raw, "rms_norm_eps", 1e-6);
    this.tieWordEmbeddings = bool(raw, "tie_word_embeddings", false);
    this.ropeInterleave = bool(raw, "rope_interleave", true);
    this.attentionBias = bool(raw, "attention_bias", false);
    const rope = ropeParameters(raw);
    this.rope = computeInvFreq(rope, this.qkRopeHeadDim);
    this.scale = (this.qkNopeHeadDim + this.qkRopeHeadDim) ** -0.5 * mscaleSquared(rope);
  }

  attention(): LatentAttentionOptions {
    return {
      hiddenSize: this.hiddenSize, numHeads: this.numAttentionHeads, qLoraRank: this.qLoraRank, kvLoraRank: this.kvLoraRank,
      qkNopeHeadDim: this.qkNopeHeadDim, qkRopeHeadDim: this.qkRopeHeadDim, vHeadDim: this.vHeadDim,
      bias: this.attentionBias, scale: this.scale, interleave: this.ropeInterleave,
    };
  }
}

/** transformers' yarn_apply_mscale factor: (0.1 * mscale_all_dim * ln(factor) + 1)^2 for a scaled rope with mscale_all_dim. */
function mscaleSquared(rope: RopeParameters): number {
  const all = rope.mscale_all_dim as number | undefined;
  if (rope.rope_type === "default" || !all) return 1;
  const factor = rope.factor ?? 1;
  const m = factor <= 1 ? 1 : 0.1 * all * Math.log(factor) + 1;
  return m * m;
}

// ------------------------------------------------------------------ layers

/** DeepseekV3DecoderLayer: MLA, then a dense MLP (first first_k_dense_replace layers) or DeepseekV3MoE. */
function deepseekV3DecoderLayer(c: DeepseekV3Config, layerIdx: number): PreNormDecoderLayer {
  return new PreNormDecoderLayer(
    new MultiHeadLatentAttention(c.attention()),
    layerIdx >= c.firstKDenseReplace
      ? new GroupLimitedMoe(groupLimitedMoeOptions(c))
      : new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
  );
}

// ------------------------------------------------------------------ causal LM

export class DeepseekV3ForCausalLM extends DecoderLM<DeepseekV3Config, PreNormDecoderLayer> {
  constructor(raw: RawConfig, c: DeepseekV3Config = new DeepseekV3Config(raw)) {
    super(raw, c, new DecoderModel(
      new Embedding(c.vocabSize, c.hiddenSize),
      Array.from({ length: c.numHiddenLayers }, (_, i) => deepseekV3DecoderLayer(c, i)),
      new RMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }

  protected override ignoredKeys(): RegExp[] {
    return [...super.ignoredKeys(), mtpLayerKeys(this.config)];
  }
}
