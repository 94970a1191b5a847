/**
 * Qwen2 (transformers' models/qwen2/modeling_qwen2.py + configuration_qwen2.py): Llama's network
 * with a bias on the q/k/v projections (none on o_proj) and a sliding window on the layers that
 * `layer_types` marks "sliding_attention".
 */
import type { RotaryAttentionOptions } from "../../nn/attention.js";
import { bool, num, withDefaults, type RawConfig } from "../configuration.js";
import { LlamaConfig, LlamaForCausalLM } from "./llama.js";

// ------------------------------------------------------------------ config

/** transformers' Qwen2Config defaults where they differ from Llama's. */
const QWEN2_DEFAULTS: RawConfig = {
  vocab_size: 151936, intermediate_size: 22016, num_key_value_heads: 32, max_position_embeddings: 32768,
  sliding_window: 4096, max_window_layers: 28,
};

/**
 * Qwen2Config: Llama's fields plus `use_sliding_window`, `max_window_layers` and `layer_types`
 * (default: "sliding_attention" from layer max_window_layers on when the window is in use).
 */
export class Qwen2Config extends LlamaConfig {
  readonly layerTypes: string[];

  constructor(raw: RawConfig, defaults: RawConfig = QWEN2_DEFAULTS) {
    const r = withDefaults(raw, defaults);
    super({ ...r, sliding_window: bool(r, "use_sliding_window", false) ? r.sliding_window : null });
    const maxWindowLayers = num(r, "max_window_layers");
    this.layerTypes = Array.isArray(r.layer_types)
      ? (r.layer_types as string[])
      : Array.from({ length: this.numHiddenLayers }, (_, i) => (this.slidingWindow && i >= maxWindowLayers ? "sliding_attention" : "full_attention"));
  }

  /** Sliding window of layer `layerIdx` (0 = full attention). */
  layerWindow(layerIdx: number): number {
    return this.layerTypes[layerIdx] === "sliding_attention" ? this.slidingWindow : 0;
  }

  override attention(layerIdx: number): RotaryAttentionOptions {
    return { ...super.attention(layerIdx), qkvBias: true, oBias: false, window: this.layerWindow(layerIdx) };
  }
}

// ------------------------------------------------------------------ causal LM

export class Qwen2ForCausalLM extends LlamaForCausalLM {
  constructor(raw: RawConfig) {
    super(raw, new Qwen2Config(raw));
  }
}
