/**
 * Qwen3-MoE (transformers' models/qwen3_moe/modeling_qwen3_moe.py + configuration_qwen3_moe.py):
 * Qwen3's attention (per-head q_norm/k_norm before rotary) with a sparse mixture-of-experts
 * feed-forward block in the layers that decoder_sparse_step / mlp_only_layers choose, a dense
 * gated MLP in the others.
 *
 *   embed_tokens -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 *
 * mlp (sparse): router `gate`, then experts.N.{gate_proj, up_proj, down_proj} (nn/moe.ts).
 */
import { RotaryAttention, type RotaryAttentionOptions } from "../../nn/attention.js";
import { Embedding, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { SparseMoeBlock } from "../../nn/moe.js";
import { bool, num, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel, PreNormDecoderLayer } from "../decoder_lm.js";
import { LlamaConfig } from "./llama.js";

// ------------------------------------------------------------------ config

/** transformers' Qwen3MoeConfig defaults where they differ from Llama's. */
const QWEN3_MOE_DEFAULTS: RawConfig = {
  vocab_size: 151936, hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 24,
  num_key_value_heads: 4, max_position_embeddings: 32768,
};

/** Qwen3MoeConfig: Llama's fields (with Qwen3-MoE's defaults) plus the expert fields. */
export class Qwen3MoeConfig extends LlamaConfig {
  readonly numExperts: number;
  readonly numExpertsPerTok: number;
  readonly moeIntermediateSize: number;
  readonly normTopkProb: boolean;
  readonly decoderSparseStep: number;
  readonly mlpOnlyLayers: number[];

  constructor(raw: RawConfig) {
    const filled: RawConfig = { ...raw };
    for (const [k, v] of Object.entries(QWEN3_MOE_DEFAULTS)) filled[k] ??= v;
    // The window applies only with use_sliding_window (Qwen3MoeConfig.__post_init__).
    filled.sliding_window = bool(raw, "use_sliding_window", false) ? num(raw, "sliding_window", 4096) : null;
    super(filled);
    this.numExperts = num(raw, "num_experts", num(raw, "num_local_experts", 128));
    this.numExpertsPerTok = num(raw, "num_experts_per_tok", 8);
    this.moeIntermediateSize = num(raw, "moe_intermediate_size", 768);
    this.normTopkProb = bool(raw, "norm_topk_prob", false);
    this.decoderSparseStep = num(raw, "decoder_sparse_step", 1);
    this.mlpOnlyLayers = Array.isArray(raw.mlp_only_layers) ? (raw.mlp_only_layers as number[]) : [];
  }

  override attention(layerIdx: number): RotaryAttentionOptions {
    return { ...super.attention(layerIdx), qkNormEps: this.rmsNormEps };
  }

  /** Whether layer `layerIdx` has the sparse expert block (else a dense MLP). */
  isSparse(layerIdx: number): boolean {
    return !this.mlpOnlyLayers.includes(layerIdx) && this.numExperts > 0 && (layerIdx + 1) % this.decoderSparseStep === 0;
  }
}

// ------------------------------------------------------------------ layers

/** Qwen3MoeDecoderLayer: a sparse MoE block, or a dense MLP on mlp_only_layers / off the decoder_sparse_step. */
function qwen3MoeDecoderLayer(c: Qwen3MoeConfig, layerIdx: number): PreNormDecoderLayer {
  return new PreNormDecoderLayer(
    new RotaryAttention(c.attention(layerIdx)),
    c.isSparse(layerIdx)
      ? new SparseMoeBlock(
        { hiddenSize: c.hiddenSize, numExperts: c.numExperts, topK: c.numExpertsPerTok, normTopkProb: c.normTopkProb, hiddenAct: c.hiddenAct },
        () => new GatedMLP(c.hiddenSize, c.moeIntermediateSize, c.hiddenAct),
        (e) => ({ gate: e.gate_proj, up: e.up_proj, down: e.down_proj }),
      )
      : new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
  );
}

// ------------------------------------------------------------------ causal LM

export class Qwen3MoeForCausalLM extends DecoderLM<Qwen3MoeConfig, PreNormDecoderLayer> {
  constructor(raw: RawConfig, c: Qwen3MoeConfig = new Qwen3MoeConfig(raw)) {
    super(raw, c, new DecoderModel(
      new Embedding(c.vocabSize, c.hiddenSize),
      Array.from({ length: c.numHiddenLayers }, (_, i) => qwen3MoeDecoderLayer(c, i)),
      new RMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }
}
