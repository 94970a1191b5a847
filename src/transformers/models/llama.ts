/**
 * Llama (transformers' models/llama/modeling_llama.py + configuration_llama.py), which also serves
 * Mistral checkpoints (MistralForCausalLM: the same network, plus an optional sliding window).
 *
 *   embed_tokens -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 */
import { Embedding, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { Module } from "../../nn/module.js";
import { RotaryAttention, type RotaryAttentionOptions } from "../../nn/attention.js";
import { add } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { computeInvFreq, type RopeTables } from "../../nn/rotary.js";
import type { LayerKVCache } from "../cache_utils.js";
import { bool, num, ropeParameters, str, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel } from "../decoder_lm.js";

// ------------------------------------------------------------------ config

/** LlamaConfig fields with transformers' defaults. */
export class LlamaConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly hiddenAct: string;
  readonly maxPositionEmbeddings: number;
  readonly rmsNormEps: number;
  readonly tieWordEmbeddings: boolean;
  readonly attentionBias: boolean;
  readonly mlpBias: boolean;
  readonly slidingWindow: number;
  readonly rope: RopeTables;

  constructor(raw: RawConfig) {
    this.vocabSize = num(raw, "vocab_size", 32000);
    this.hiddenSize = num(raw, "hidden_size", 4096);
    this.intermediateSize = num(raw, "intermediate_size", 11008);
    this.numHiddenLayers = num(raw, "num_hidden_layers", 32);
    this.numAttentionHeads = num(raw, "num_attention_heads", 32);
    this.numKeyValueHeads = num(raw, "num_key_value_heads", this.numAttentionHeads);
    this.headDim = num(raw, "head_dim", Math.floor(this.hiddenSize / this.numAttentionHeads));
    this.hiddenAct = str(raw, "hidden_act", "silu");
    this.maxPositionEmbeddings = num(raw, "max_position_embeddings", 2048);
    this.rmsNormEps = num(raw, "rms_norm_eps", 1e-6);
    this.tieWordEmbeddings = bool(raw, "tie_word_embeddings", false);
    this.attentionBias = bool(raw, "attention_bias", false);
    this.mlpBias = bool(raw, "mlp_bias", false);
    this.slidingWindow = num(raw, "sliding_window", 0);
    this.rope = computeInvFreq(ropeParameters(raw), this.headDim);
  }

  /** Self-attention of layer `layerIdx` (configs of derived families override this). */
  attention(_layerIdx: number): RotaryAttentionOptions {
    return {
      hiddenSize: this.hiddenSize, numHeads: this.numAttentionHeads, numKvHeads: this.numKeyValueHeads, headDim: this.headDim,
      qkvBias: this.attentionBias, oBias: this.attentionBias, window: this.slidingWindow,
    };
  }
}

// ------------------------------------------------------------------ layers

class LlamaDecoderLayer extends Module {
  readonly self_attn: RotaryAttention;
  readonly mlp: GatedMLP;
  readonly input_layernorm: RMSNorm;
  readonly post_attention_layernorm: RMSNorm;
  constructor(c: LlamaConfig, layerIdx: number) {
    super();
    this.self_attn = this.module("self_attn", new RotaryAttention(c.attention(layerIdx)));
    this.mlp = this.module("mlp", new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct, c.mlpBias));
    this.input_layernorm = this.module("input_layernorm", new RMSNorm(c.hiddenSize, c.rmsNormEps));
    this.post_attention_layernorm = this.module("post_attention_layernorm", new RMSNorm(c.hiddenSize, c.rmsNormEps));
  }

  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor {
    const h = add(x, this.self_attn.forward(this.input_layernorm.forward(x), cos, sin, mask, cache));
    return add(h, this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }
}

// ------------------------------------------------------------------ causal LM

export class LlamaForCausalLM extends DecoderLM<LlamaConfig, LlamaDecoderLayer> {
  /** `config`: the parsed config (derived families pass their own LlamaConfig subclass). */
  constructor(raw: RawConfig, c: LlamaConfig = new LlamaConfig(raw)) {
    super(raw, c, new DecoderModel(
      new Embedding(c.vocabSize, c.hiddenSize),
      Array.from({ length: c.numHiddenLayers }, (_, i) => new LlamaDecoderLayer(c, i)),
      new RMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }
}

/** MistralForCausalLM: Llama's network with an optional sliding window (config.sliding_window). */
export class MistralForCausalLM extends LlamaForCausalLM {}
