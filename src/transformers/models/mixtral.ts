/**
 * Mixtral (transformers' models/mixtral/modeling_mixtral.py + configuration_mixtral.py): Mistral's
 * attention with a sparse mixture-of-experts feed-forward block in every layer.
 *
 *   embed_tokens -> N x [x + attn(input_layernorm(x)); x + block_sparse_moe(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 *
 * block_sparse_moe: router `gate`, then experts.N.{w1 (gate), w3 (up), w2 (down)} (nn/moe.ts).
 */
import { Embedding, Linear, RMSNorm } from "../../nn/layers.js";
import { Module } from "../../nn/module.js";
import { RotaryAttention } from "../../nn/attention.js";
import { SparseMoeBlock } from "../../nn/moe.js";
import { num, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel, PreNormDecoderLayer } from "../decoder_lm.js";
import { LlamaConfig } from "./llama.js";

// ------------------------------------------------------------------ config

/** transformers' MixtralConfig defaults where they differ from Llama's. */
const MIXTRAL_DEFAULTS: RawConfig = {
  intermediate_size: 14336, num_key_value_heads: 8, max_position_embeddings: 4096 * 32,
  rms_norm_eps: 1e-5, rope_theta: 1e6,
};

/** MixtralConfig: Llama's fields (with Mixtral's defaults) plus the expert routing fields. */
export class MixtralConfig extends LlamaConfig {
  readonly numLocalExperts: number;
  readonly numExpertsPerTok: number;

  constructor(raw: RawConfig) {
    const filled: RawConfig = { ...raw };
    for (const [k, v] of Object.entries(MIXTRAL_DEFAULTS)) filled[k] ??= v;
    super(filled);
    this.numLocalExperts = num(raw, "num_local_experts", num(raw, "num_experts", 8));
    this.numExpertsPerTok = num(raw, "num_experts_per_tok", 2);
  }
}

// ------------------------------------------------------------------ layers

/** One expert's weights, w2(act(w1(x)) * w3(x)), as Mixtral checkpoints name them. */
class MixtralExpert extends Module {
  readonly w1: Linear;
  readonly w2: Linear;
  readonly w3: Linear;
  constructor(c: MixtralConfig) {
    super();
    this.w1 = this.module("w1", new Linear(c.hiddenSize, c.intermediateSize, false));
    this.w2 = this.module("w2", new Linear(c.intermediateSize, c.hiddenSize, false));
    this.w3 = this.module("w3", new Linear(c.hiddenSize, c.intermediateSize, false));
  }
}

/** MixtralDecoderLayer: the feed-forward is the sparse MoE block, named block_sparse_moe. */
function mixtralDecoderLayer(c: MixtralConfig, layerIdx: number): PreNormDecoderLayer {
  return new PreNormDecoderLayer(
    new RotaryAttention(c.attention(layerIdx)),
    new SparseMoeBlock(
      { hiddenSize: c.hiddenSize, numExperts: c.numLocalExperts, topK: c.numExpertsPerTok, normTopkProb: true, hiddenAct: c.hiddenAct },
      () => new MixtralExpert(c),
      (e) => ({ gate: e.w1, up: e.w3, down: e.w2 }),
    ),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
    "block_sparse_moe",
  );
}

// ------------------------------------------------------------------ causal LM

export class MixtralForCausalLM extends DecoderLM<MixtralConfig, PreNormDecoderLayer> {
  constructor(raw: RawConfig, c: MixtralConfig = new MixtralConfig(raw)) {
    super(raw, c, new DecoderModel(
      new Embedding(c.vocabSize, c.hiddenSize),
      Array.from({ length: c.numHiddenLayers }, (_, i) => mixtralDecoderLayer(c, i)),
      new RMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }
}
