/**
 * SmolLM3 (transformers' models/smollm3/modeling_smollm3.py + configuration_smollm3.py): Llama's
 * network in which the layers whose `no_rope_layers` entry is 0 (default: every
 * `no_rope_layer_interval`-th) apply no rotary to q and k (NoPE), and an optional sliding window on
 * the layers `layer_types` marks "sliding_attention" when `use_sliding_window`.
 *
 *   embed_tokens -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head (tied to embed_tokens by default)
 */
import type { RotaryAttentionOptions } from "../../nn/attention.js";
import type { RopeTables } from "../../nn/rotary.js";
import { bool, ConfigError, num, withDefaults, type RawConfig } from "../configuration.js";
import { LlamaConfig, LlamaForCausalLM } from "./llama.js";

// ------------------------------------------------------------------ config

/** transformers' SmolLM3Config defaults where they differ from Llama's. */
const SMOLLM3_DEFAULTS: RawConfig = {
  vocab_size: 128256, hidden_size: 2048, intermediate_size: 11008, num_hidden_layers: 36, num_attention_heads: 16,
  num_key_value_heads: 4, max_position_embeddings: 32768, tie_word_embeddings: true, rope_theta: 2_000_000,
};

/**
 * The rotation of a NoPE layer: zero frequency, so cos = 1 and sin = 0 and q/k pass through
 * unchanged (bit for bit), while the layer still shares the decoder loop's rotary plumbing.
 */
const NO_ROPE: RopeTables = { dim: 2, invFreq: new Float32Array(1), attentionScaling: 1 };

/** SmolLM3Config: Llama's fields plus `no_rope_layers` (1 = rotary, 0 = none) and per-layer windows. */
export class SmolLM3Config extends LlamaConfig {
  readonly noRopeLayers: number[];
  readonly layerTypes: string[];

  constructor(raw: RawConfig) {
    const r = withDefaults(raw, SMOLLM3_DEFAULTS);
    const useWindow = bool(r, "use_sliding_window", false);
    super({ ...r, sliding_window: useWindow ? r.sliding_window : null });
    const interval = num(r, "no_rope_layer_interval", 4);
    // The list wins over the interval when both are present (SmolLM3Config.__post_init__).
    this.noRopeLayers = Array.isArray(r.no_rope_layers)
      ? (r.no_rope_layers as number[])
      : Array.from({ length: this.numHiddenLayers }, (_, i) => Number((i + 1) % interval !== 0));
    if (this.noRopeLayers.length !== this.numHiddenLayers) {
      throw new ConfigError(`config.json 'no_rope_layers' has ${this.noRopeLayers.length} entries for ${this.numHiddenLayers} layers`);
    }
    this.layerTypes = Array.isArray(r.layer_types)
      ? (r.layer_types as string[])
      : this.noRopeLayers.map((rope) => (useWindow && this.slidingWindow && !rope ? "sliding_attention" : "full_attention"));
  }

  override attention(layerIdx: number): RotaryAttentionOptions {
    return { ...super.attention(layerIdx), window: this.layerTypes[layerIdx] === "sliding_attention" ? this.slidingWindow : 0 };
  }

  /** The rotary tables of layer `layerIdx`: the config's rope, or none (NoPE). */
  ropeFor(layerIdx: number): RopeTables {
    return this.noRopeLayers[layerIdx] ? this.rope : NO_ROPE;
  }
}

// ------------------------------------------------------------------ causal LM

export class SmolLM3ForCausalLM extends LlamaForCausalLM {
  declare readonly c: SmolLM3Config;
  constructor(raw: RawConfig) {
    super(raw, new SmolLM3Config(raw));
  }

  protected override ropeFor(layer: number): RopeTables {
    return this.c.ropeFor(layer);
  }
}
