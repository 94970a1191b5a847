/**
 * Llama (transformers' models/llama/modeling_llama.py + configuration_llama.py), which also serves
 * Mistral checkpoints (MistralForCausalLM: the same network, plus an optional sliding window).
 *
 *   embed_tokens -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 */
import { Embedding, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { RotaryAttention, type RotaryAttentionOptions } from "../../nn/attention.js";
import { computeInvFreq, type RopeTables } from "../../nn/rotary.js";
import { bool, num, ropeParameters, str, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel, PreNormDecoderLayer } from "../decoder_lm.js";

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

/** LlamaDecoderLayer: RotaryAttention and the gated MLP in the pre-norm block. */
function llamaDecoderLayer(c: LlamaConfig, layerIdx: number): PreNormDecoderLayer {
  return new PreNormDecoderLayer(
    new RotaryAttention(c.attention(layerIdx)),
    new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct, c.mlpBias),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
  );
}

// ------------------------------------------------------------------ causal LM

export class LlamaForCausalLM extends DecoderLM<LlamaConfig, PreNormDecoderLayer> {
  /** `config`: the parsed config (derived families pass their own LlamaConfig subclass). */
  constructor(raw: RawConfig, c: LlamaConfig = new LlamaConfig(raw)) {
    super(raw, c, new DecoderModel(
      new Embedding(c.vocabSize, c.hiddenSize),
      Array.from({ length: c.numHiddenLayers }, (_, i) => llamaDecoderLayer(c, i)),
      new RMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }
}

/** MistralForCausalLM: Llama's network with an optional sliding window (config.sliding_window). */
export class MistralForCausalLM extends LlamaForCausalLM {}
