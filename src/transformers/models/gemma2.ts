/**
 * Gemma 2 (transformers' models/gemma2/modeling_gemma2.py + configuration_gemma2.py): Gemma with
 * norms after attention and around the MLP, scores scaled by query_pre_attn_scalar^-0.5 and
 * soft-capped (attn_logit_softcapping), sliding-window attention on the layers `layer_types` marks
 * "sliding_attention" (default: every other layer, from the first), and soft-capped logits
 * (final_logit_softcapping).
 *
 *   embed_tokens * sqrt(hidden) -> N x [x + post_attention_layernorm(attn(input_layernorm(x)));
 *   x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))] -> norm -> lm_head -> softcap
 */
import { RotaryAttention, type RotaryAttentionOptions } from "../../nn/attention.js";
import { GatedMLP } from "../../nn/mlp.js";
import { Module } from "../../nn/module.js";
import type { RopeTables } from "../../nn/rotary.js";
import { add, div, mul, tanh } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { LayerKVCache } from "../cache_utils.js";
import { ConfigError, num, str, withDefaults, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel } from "../decoder_lm.js";
import { assertCausal, GemmaRMSNorm, GemmaTextScaledWordEmbedding } from "./gemma.js";
import { LlamaConfig } from "./llama.js";

// ------------------------------------------------------------------ config

/** transformers' Gemma2Config defaults where they differ from Llama's. */
const GEMMA2_DEFAULTS: RawConfig = {
  vocab_size: 256000, hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8,
  num_key_value_heads: 4, head_dim: 256, hidden_activation: "gelu_pytorch_tanh", max_position_embeddings: 8192,
  tie_word_embeddings: true, query_pre_attn_scalar: 256, sliding_window: 4096, final_logit_softcapping: 30.0,
  attn_logit_softcapping: 50.0,
};

/**
 * Gemma2Config: Llama's fields with Gemma 2's defaults (the MLP activation is `hidden_activation`),
 * query_pre_attn_scalar, sliding_window with `layer_types`, and the two soft-capping values
 * (null = none).
 */
export class Gemma2Config extends LlamaConfig {
  readonly queryPreAttnScalar: number;
  readonly layerTypes: string[];
  /** 0 = no soft-capping. */
  readonly attnLogitSoftcapping: number;
  readonly finalLogitSoftcapping: number;

  /** `slidingPattern`: every how many layers one is "full_attention" when layer_types is absent. */
  constructor(raw: RawConfig, defaults: RawConfig = GEMMA2_DEFAULTS, slidingPattern = 2) {
    const r = withDefaults(raw, defaults);
    assertCausal(r);
    super({ ...r, hidden_act: str(r, "hidden_activation", "gelu_pytorch_tanh") });
    this.queryPreAttnScalar = num(r, "query_pre_attn_scalar");
    this.attnLogitSoftcapping = num(r, "attn_logit_softcapping", 0);
    this.finalLogitSoftcapping = num(r, "final_logit_softcapping", 0);
    this.layerTypes = Array.isArray(r.layer_types)
      ? (r.layer_types as string[])
      : Array.from({ length: this.numHiddenLayers }, (_, i) => ((i + 1) % slidingPattern ? "sliding_attention" : "full_attention"));
    const unknown = this.layerTypes.find((t) => t !== "sliding_attention" && t !== "full_attention");
    if (unknown !== undefined) throw new ConfigError(`unsupported layer type '${unknown}' in layer_types; supported: sliding_attention, full_attention`);
  }

  /** Rotary tables of the layers of `layerType` (Gemma 2: one for all). */
  ropeFor(_layerType: string): RopeTables {
    return this.rope;
  }

  override attention(layerIdx: number): RotaryAttentionOptions {
    return {
      ...super.attention(layerIdx),
      scale: this.queryPreAttnScalar ** -0.5,
      window: this.layerTypes[layerIdx] === "sliding_attention" ? this.slidingWindow : 0,
      softcap: this.attnLogitSoftcapping,
    };
  }
}

// ------------------------------------------------------------------ layers

/** Gemma2DecoderLayer (also Gemma 3's): attention and MLP each between a pre- and a post-norm. */
export class Gemma2DecoderLayer extends Module {
  readonly self_attn: RotaryAttention;
  readonly mlp: GatedMLP;
  readonly input_layernorm: GemmaRMSNorm;
  readonly post_attention_layernorm: GemmaRMSNorm;
  readonly pre_feedforward_layernorm: GemmaRMSNorm;
  readonly post_feedforward_layernorm: GemmaRMSNorm;
  constructor(c: Gemma2Config, layerIdx: number) {
    super();
    const norm = () => new GemmaRMSNorm(c.hiddenSize, c.rmsNormEps);
    this.self_attn = this.module("self_attn", new RotaryAttention(c.attention(layerIdx)));
    this.mlp = this.module("mlp", new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct));
    this.input_layernorm = this.module("input_layernorm", norm());
    this.post_attention_layernorm = this.module("post_attention_layernorm", norm());
    this.pre_feedforward_layernorm = this.module("pre_feedforward_layernorm", norm());
    this.post_feedforward_layernorm = this.module("post_feedforward_layernorm", norm());
  }

  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor {
    const attn = this.self_attn.forward(this.input_layernorm.forward(x), cos, sin, mask, cache);
    const h = add(x, this.post_attention_layernorm.forward(attn));
    return add(h, this.post_feedforward_layernorm.forward(this.mlp.forward(this.pre_feedforward_layernorm.forward(h))));
  }
}

/** cap * tanh(x / cap): Gemma 2's logit soft-capping. */
function softcap(x: Tensor, cap: number): Tensor {
  return mul(tanh(div(x, cap)), cap);
}

// ------------------------------------------------------------------ causal LM

/** Gemma2ForCausalLM: forward(inputs) -> float32 soft-capped logits [B, L', vocab]. */
export class Gemma2ForCausalLM extends DecoderLM<Gemma2Config, Gemma2DecoderLayer> {
  /** `c`: the parsed config (Gemma 3 passes its Gemma2Config subclass). */
  constructor(raw: RawConfig, c: Gemma2Config = new Gemma2Config(raw)) {
    super(raw, c, new DecoderModel(
      new GemmaTextScaledWordEmbedding(c.vocabSize, c.hiddenSize, c.hiddenSize ** 0.5),
      Array.from({ length: c.numHiddenLayers }, (_, i) => new Gemma2DecoderLayer(c, i)),
      new GemmaRMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }

  protected override ropeFor(layer: number): RopeTables {
    return this.c.ropeFor(this.c.layerTypes[layer]);
  }

  protected override finalLogits(logits: Tensor): Tensor {
    return this.c.finalLogitSoftcapping ? softcap(logits, this.c.finalLogitSoftcapping) : logits;
  }
}
