/**
 * Gemma (transformers' models/gemma/modeling_gemma.py + configuration_gemma.py): Llama's network
 * with token embeddings scaled by sqrt(hidden_size), RMSNorms of the form x̂ * (1 + weight), a
 * GELU (tanh) gated MLP and tied embeddings.
 *
 *   embed_tokens * sqrt(hidden) -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 */
import { RotaryAttention } from "../../nn/attention.js";
import { Embedding, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { decode, encode } from "../../tensor/host.js";
import { mul } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { bool, ConfigError, withDefaults, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel, PreNormDecoderLayer } from "../decoder_lm.js";
import { LlamaConfig } from "./llama.js";

// ------------------------------------------------------------------ config

/** transformers' GemmaConfig defaults where they differ from Llama's. */
const GEMMA_DEFAULTS: RawConfig = {
  vocab_size: 256000, hidden_size: 3072, intermediate_size: 24576, num_hidden_layers: 28, num_attention_heads: 16,
  num_key_value_heads: 16, head_dim: 256, hidden_act: "gelu_pytorch_tanh", max_position_embeddings: 8192,
  tie_word_embeddings: true,
};

/** Throws for configs of Gemma's bidirectional (embedding) variants: tsorch runs Gemma as a causal LM. */
export function assertCausal(raw: RawConfig): void {
  if (bool(raw, "use_bidirectional_attention", false)) {
    throw new ConfigError(`use_bidirectional_attention is not supported (${raw.model_type} is run as a causal LM)`);
  }
}

/**
 * GemmaConfig: Llama's fields with Gemma's defaults. A legacy `hidden_act: "gelu"` means the tanh
 * approximation (as transformers' __post_init__ rewrites it).
 */
export class GemmaConfig extends LlamaConfig {
  constructor(raw: RawConfig) {
    const r = withDefaults(raw, GEMMA_DEFAULTS);
    assertCausal(r);
    super({ ...r, hidden_act: r.hidden_act === "gelu" ? "gelu_pytorch_tanh" : r.hidden_act });
  }
}

// ------------------------------------------------------------------ layers

/** nn.Embedding whose output is multiplied by `embedScale` cast to the weight's dtype (GemmaTextScaledWordEmbedding). */
export class GemmaTextScaledWordEmbedding extends Embedding {
  constructor(num: number, dim: number, readonly embedScale: number) {
    super(num, dim);
  }
  override forward(ids: Tensor): Tensor {
    const dtype = this.weight.value.dtype;
    return mul(super.forward(ids), Number(decode(encode([this.embedScale], dtype), dtype)[0]));
  }
}

/** GemmaRMSNorm: x / sqrt(mean(x^2) + eps) * (1 + weight), in float32. */
export class GemmaRMSNorm extends RMSNorm {
  constructor(dim: number, eps: number) {
    super(dim, eps, 1);
  }
}

/** GemmaDecoderLayer: Llama's block with (1 + w) RMSNorms. */
function gemmaDecoderLayer(c: GemmaConfig, layerIdx: number): PreNormDecoderLayer {
  return new PreNormDecoderLayer(
    new RotaryAttention(c.attention(layerIdx)),
    new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct),
    new GemmaRMSNorm(c.hiddenSize, c.rmsNormEps),
    new GemmaRMSNorm(c.hiddenSize, c.rmsNormEps),
  );
}

// ------------------------------------------------------------------ causal LM

/** GemmaForCausalLM: forward(inputs) -> float32 logits [B, L', vocab]. */
export class GemmaForCausalLM extends DecoderLM<GemmaConfig, PreNormDecoderLayer> {
  constructor(raw: RawConfig, c: GemmaConfig = new GemmaConfig(raw)) {
    super(raw, c, new DecoderModel(
      new GemmaTextScaledWordEmbedding(c.vocabSize, c.hiddenSize, c.hiddenSize ** 0.5),
      Array.from({ length: c.numHiddenLayers }, (_, i) => gemmaDecoderLayer(c, i)),
      new GemmaRMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }
}
