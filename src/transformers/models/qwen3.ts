/**
 * Qwen3 (transformers' models/qwen3/modeling_qwen3.py + configuration_qwen3.py): Qwen2's network
 * with RMSNorms q_norm/k_norm over each head's dims (applied before rotary), an explicit head_dim
 * (not necessarily hidden_size / num_attention_heads) and `attention_bias` on all four projections.
 */
import type { RotaryAttentionOptions } from "../../nn/attention.js";
import type { RawConfig } from "../configuration.js";
import { LlamaForCausalLM } from "./llama.js";
import { Qwen2Config } from "./qwen2.js";

// ------------------------------------------------------------------ config

/** transformers' Qwen3Config defaults where they differ from Llama's. */
const QWEN3_DEFAULTS: RawConfig = {
  vocab_size: 151936, intermediate_size: 22016, num_key_value_heads: 32, head_dim: 128, max_position_embeddings: 32768,
  sliding_window: 4096, max_window_layers: 28,
};

/** Qwen3Config: Qwen2Config's fields (with Qwen3's defaults) and `head_dim`, `attention_bias`. */
export class Qwen3Config extends Qwen2Config {
  constructor(raw: RawConfig) {
    super(raw, QWEN3_DEFAULTS);
  }

  override attention(layerIdx: number): RotaryAttentionOptions {
    return {
      ...super.attention(layerIdx), qkvBias: this.attentionBias, oBias: this.attentionBias, qkNormEps: this.rmsNormEps,
    };
  }
}

// ------------------------------------------------------------------ causal LM

export class Qwen3ForCausalLM extends LlamaForCausalLM {
  constructor(raw: RawConfig) {
    super(raw, new Qwen3Config(raw));
  }
}
