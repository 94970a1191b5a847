/**
 * Gemma (transformers' models/gemma/modeling_gemma.py + configuration_gemma.py): Llama's network
 * with token embeddings scaled by sqrt(hidden_size), RMSNorms of the form x̂ * (1 + weight), a
 * GELU (tanh) gated MLP and tied embeddings.
 *
 *   embed_tokens * sqrt(hidden) -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 */
import { RotaryAttention } from "../../nn/attention.js";
import { Embedding, Linear, RMSNorm } from "../../nn/layers.js";
import { GatedMLP } from "../../nn/mlp.js";
import { Module, ModuleList } from "../../nn/module.js";
import { ropeCosSin } from "../../nn/rotary.js";
import { decode, encode } from "../../tensor/host.js";
import { add, mul } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { LayerKVCache } from "../cache_utils.js";
import { bool, ConfigError, withDefaults, type RawConfig } from "../configuration.js";
import { PreTrainedModel, paddingMask, type CausalLMInputs } from "../modeling_utils.js";
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

class GemmaDecoderLayer extends Module {
  readonly self_attn: RotaryAttention;
  readonly mlp: GatedMLP;
  readonly input_layernorm: GemmaRMSNorm;
  readonly post_attention_layernorm: GemmaRMSNorm;
  constructor(c: GemmaConfig, layerIdx: number) {
    super();
    this.self_attn = this.module("self_attn", new RotaryAttention(c.attention(layerIdx)));
    this.mlp = this.module("mlp", new GatedMLP(c.hiddenSize, c.intermediateSize, c.hiddenAct));
    this.input_layernorm = this.module("input_layernorm", new GemmaRMSNorm(c.hiddenSize, c.rmsNormEps));
    this.post_attention_layernorm = this.module("post_attention_layernorm", new GemmaRMSNorm(c.hiddenSize, c.rmsNormEps));
  }

  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor {
    const h = add(x, this.self_attn.forward(this.input_layernorm.forward(x), cos, sin, mask, cache));
    return add(h, this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }
}

class GemmaModel extends Module {
  readonly embed_tokens: GemmaTextScaledWordEmbedding;
  readonly layers: ModuleList<GemmaDecoderLayer>;
  readonly norm: GemmaRMSNorm;
  constructor(c: GemmaConfig) {
    super();
    this.embed_tokens = this.module("embed_tokens", new GemmaTextScaledWordEmbedding(c.vocabSize, c.hiddenSize, c.hiddenSize ** 0.5));
    this.layers = this.module("layers", new ModuleList(Array.from({ length: c.numHiddenLayers }, (_, i) => new GemmaDecoderLayer(c, i))));
    this.norm = this.module("norm", new GemmaRMSNorm(c.hiddenSize, c.rmsNormEps));
  }
}

// ------------------------------------------------------------------ causal LM

/** GemmaForCausalLM: forward(inputs) -> float32 logits [B, L', vocab]. */
export class GemmaForCausalLM extends PreTrainedModel {
  readonly c: GemmaConfig;
  readonly model: GemmaModel;
  readonly lm_head: Linear;

  constructor(raw: RawConfig) {
    super(raw);
    this.c = new GemmaConfig(raw);
    this.model = this.module("model", new GemmaModel(this.c));
    this.lm_head = this.module("lm_head", new Linear(this.c.hiddenSize, this.c.vocabSize, false));
  }

  get numLayers(): number { return this.c.numHiddenLayers; }
  get maxPositions(): number { return this.c.maxPositionEmbeddings; }
  protected override tiedWeights(): Record<string, string> {
    return this.c.tieWordEmbeddings ? { "lm_head.weight": "model.embed_tokens.weight" } : {};
  }

  forward({ inputIds, positionIds, attentionMask, cache, logitsToKeep = 0 }: CausalLMInputs): Tensor {
    const { cos, sin } = ropeCosSin(this.c.rope, positionIds, this.device);
    const mask = paddingMask(attentionMask, this.device);
    let x = this.model.embed_tokens.forward(inputIds);
    this.model.layers.items.forEach((layer, i) => {
      x = layer.forward(x, cos, sin, mask, cache?.layers[i] ?? null);
    });
    const L = x.shape[1];
    if (logitsToKeep > 0 && logitsToKeep < L) x = x.narrow(1, L - logitsToKeep, logitsToKeep);
    return this.lm_head.forward(this.model.norm.forward(x));
  }
}
