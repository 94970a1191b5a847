/**
 * Gemma 3, text only (transformers' models/gemma3/modeling_gemma3.py, Gemma3ForCausalLM +
 * Gemma3TextConfig): Gemma 2's network with (1 + w) RMSNorms q_norm/k_norm over each head's dims
 * before rotary, one full-attention layer in every `sliding_window_pattern` (default 6), separate
 * rotary tables for sliding ("local", theta 10k) and full ("global", theta 1M) layers, and
 * soft-capping off by default.
 */
import type { RotaryAttentionOptions } from "../../nn/attention.js";
import { computeInvFreq, type RopeParameters, type RopeTables } from "../../nn/rotary.js";
import { num, ropeParameters, withDefaults, type RawConfig } from "../configuration.js";
import { Gemma2Config, Gemma2ForCausalLM } from "./gemma2.js";

// ------------------------------------------------------------------ config

/** transformers' Gemma3TextConfig defaults where they differ from Llama's. */
const GEMMA3_DEFAULTS: RawConfig = {
  vocab_size: 262208, hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8,
  num_key_value_heads: 4, head_dim: 256, hidden_activation: "gelu_pytorch_tanh", max_position_embeddings: 131072,
  tie_word_embeddings: true, query_pre_attn_scalar: 256, sliding_window: 4096, final_logit_softcapping: null,
  attn_logit_softcapping: null,
};

const LAYER_TYPES = ["full_attention", "sliding_attention"];

/**
 * Rope parameters of the layers of `layerType`: its entry of `rope_parameters`
 * ({"full_attention": {...}, "sliding_attention": {...}}), else the legacy fields (as
 * Gemma3TextConfig.convert_rope_params_to_dict): `rope_theta` and `rope_scaling` for full attention,
 * `rope_local_base_freq` for sliding attention.
 */
function layerRopeParameters(r: RawConfig, layerType: string): RopeParameters {
  const sliding = layerType === "sliding_attention";
  const legacy = sliding ? { ...r, rope_theta: r.rope_local_base_freq, rope_scaling: null } : r;
  return ropeParameters(legacy, sliding ? 10_000 : 1_000_000, layerType);
}

/**
 * Gemma3TextConfig: Gemma 2's fields with Gemma 3's defaults, and rotary tables per layer type
 * (ropeFor; the model does not use the single `rope` Llama's config computes).
 */
export class Gemma3TextConfig extends Gemma2Config {
  private readonly ropeByType: Record<string, RopeTables> = {};

  constructor(raw: RawConfig) {
    const r = withDefaults(raw, GEMMA3_DEFAULTS);
    super(r, GEMMA3_DEFAULTS, num(r, "sliding_window_pattern", 6));
    for (const type of LAYER_TYPES) this.ropeByType[type] = computeInvFreq(layerRopeParameters(r, type), this.headDim);
  }

  override ropeFor(layerType: string): RopeTables {
    return this.ropeByType[layerType];
  }

  override attention(layerIdx: number): RotaryAttentionOptions {
    return { ...super.attention(layerIdx), qkNormEps: this.rmsNormEps, qkNormOffset: 1 };
  }
}

// ------------------------------------------------------------------ causal LM

/** Gemma3ForCausalLM (model_type gemma3_text): Gemma 2's causal LM with Gemma3TextConfig. */
export class Gemma3ForCausalLM extends Gemma2ForCausalLM {
  constructor(raw: RawConfig) {
    super(raw, new Gemma3TextConfig(raw));
  }
}
