/**
 * Phi-3 (transformers' models/phi3/modeling_phi3.py + configuration_phi3.py): Llama's layout with
 * fused projections — qkv_proj (q, k, v stacked along the output) and gate_up_proj (gate, up) —
 * split with views; partial rotary (partial_rotary_factor) and LongRoPE scaling ("longrope", also
 * written "su" or "yarn" in Phi-3 configs).
 *
 *   embed_tokens -> N x [x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))]
 *   -> norm -> lm_head
 */
import { activation, type Activation } from "../../nn/activations.js";
import { causalAttention } from "../../nn/attention.js";
import { Embedding, Linear, RMSNorm } from "../../nn/layers.js";
import { Module } from "../../nn/module.js";
import { computeInvFreq, type RopeTables } from "../../nn/rotary.js";
import { applyRotary, mul } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { LayerKVCache } from "../cache_utils.js";
import { bool, num, ropeParameters, str, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel, PreNormDecoderLayer } from "../decoder_lm.js";

// ------------------------------------------------------------------ config

/** Phi3Config fields with transformers' defaults. */
export class Phi3Config {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly hiddenAct: string;
  readonly maxPositionEmbeddings: number;
  readonly originalMaxPositionEmbeddings: number;
  readonly rmsNormEps: number;
  readonly tieWordEmbeddings: boolean;
  readonly slidingWindow: number;
  readonly rope: RopeTables;

  constructor(raw: RawConfig) {
    this.vocabSize = num(raw, "vocab_size", 32064);
    this.hiddenSize = num(raw, "hidden_size", 3072);
    this.intermediateSize = num(raw, "intermediate_size", 8192);
    this.numHiddenLayers = num(raw, "num_hidden_layers", 32);
    this.numAttentionHeads = num(raw, "num_attention_heads", 32);
    this.numKeyValueHeads = num(raw, "num_key_value_heads", this.numAttentionHeads);
    this.headDim = num(raw, "head_dim", Math.floor(this.hiddenSize / this.numAttentionHeads));
    this.hiddenAct = str(raw, "hidden_act", "silu");
    this.maxPositionEmbeddings = num(raw, "max_position_embeddings", 4096);
    this.originalMaxPositionEmbeddings = num(raw, "original_max_position_embeddings", 4096);
    this.rmsNormEps = num(raw, "rms_norm_eps", 1e-5);
    this.tieWordEmbeddings = bool(raw, "tie_word_embeddings", false);
    this.slidingWindow = num(raw, "sliding_window", 0);
    // Phi3Config.convert_rope_params_to_dict: "su" and "yarn" are LongRoPE; its original length is the config's.
    const rope = ropeParameters(raw);
    this.rope = computeInvFreq({
      ...rope,
      rope_type: rope.rope_type === "su" || rope.rope_type === "yarn" ? "longrope" : rope.rope_type,
      original_max_position_embeddings: this.originalMaxPositionEmbeddings,
      max_position_embeddings: this.maxPositionEmbeddings,
    }, this.headDim);
  }
}

// ------------------------------------------------------------------ layers

class Phi3MLP extends Module {
  readonly gate_up_proj: Linear;
  readonly down_proj: Linear;
  private readonly act: Activation;
  constructor(c: Phi3Config) {
    super();
    this.gate_up_proj = this.module("gate_up_proj", new Linear(c.hiddenSize, 2 * c.intermediateSize, false));
    this.down_proj = this.module("down_proj", new Linear(c.intermediateSize, c.hiddenSize, false));
    this.act = activation(c.hiddenAct);
  }

  forward(x: Tensor): Tensor {
    const [gate, up] = this.gate_up_proj.forward(x).chunk(2, -1);
    return this.down_proj.forward(mul(up, this.act(gate)));
  }
}

class Phi3Attention extends Module {
  readonly o_proj: Linear;
  readonly qkv_proj: Linear;
  constructor(private readonly c: Phi3Config) {
    super();
    const { hiddenSize: h, numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d } = c;
    this.o_proj = this.module("o_proj", new Linear(nq * d, h, false));
    this.qkv_proj = this.module("qkv_proj", new Linear(h, (nq + 2 * nkv) * d, false));
  }

  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor {
    const [B, L] = x.shape;
    const { numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d } = this.c;
    const qkv = this.qkv_proj.forward(x);
    const q = qkv.narrow(2, 0, nq * d).view(B, L, nq, d);
    const k = qkv.narrow(2, nq * d, nkv * d).view(B, L, nkv, d);
    const v = qkv.narrow(2, (nq + nkv) * d, nkv * d).view(B, L, nkv, d);
    const out = causalAttention(applyRotary(q, cos, sin), applyRotary(k, cos, sin), v, cache, { scale: d ** -0.5, mask, window: this.c.slidingWindow });
    return this.o_proj.forward(out);
  }
}

/** Phi3DecoderLayer: fused-projection attention and MLP in the pre-norm block. */
function phi3DecoderLayer(c: Phi3Config): PreNormDecoderLayer {
  return new PreNormDecoderLayer(
    new Phi3Attention(c),
    new Phi3MLP(c),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
  );
}

// ------------------------------------------------------------------ causal LM

export class Phi3ForCausalLM extends DecoderLM<Phi3Config, PreNormDecoderLayer> {
  constructor(raw: RawConfig, c: Phi3Config = new Phi3Config(raw)) {
    super(raw, c, new DecoderModel(
      new Embedding(c.vocabSize, c.hiddenSize),
      Array.from({ length: c.numHiddenLayers }, () => phi3DecoderLayer(c)),
      new RMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }

  override cacheRecomputeLength(): number | undefined {
    return this.c.rope.long ? this.c.originalMaxPositionEmbeddings : undefined;
  }
}
