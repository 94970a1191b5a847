/**
 * gpt-oss (transformers' models/gpt_oss/modeling_gpt_oss.py + configuration_gpt_oss.py): a
 * pre-norm decoder whose attention has biases on q/k/v/o, a learned sink logit per head
 * (`self_attn.sinks`) and a sliding window on the layers `layer_types` marks "sliding_attention",
 * YaRN rotary, and a mixture of experts in every layer:
 *
 *   router: logits = x W^T + b; top-k; softmax over those k;
 *   expert e: [gate | up] = x @ gate_up_proj[e] + gate_up_proj_bias[e] (gate and up interleaved
 *   along the last axis), gate = min(gate, limit), up = clamp(up, -limit, limit),
 *   out = ((up + 1) * gate * sigmoid(1.702 gate)) @ down_proj[e] + down_proj_bias[e].
 *
 * Expert weights come input-major as unquantized files hold them ([E, in, out], x @ W), or as
 * MXFP4 (`*_blocks` + `*_scales`, quantization_config.quant_method "mxfp4") as the Hub files hold
 * them, dequantized on the device (nn/expert_weights.ts, transformers/mxfp4.ts); each expert is used
 * as an out × in matrix through gatherLinear, so routing stays on the device.
 */
import type { Device } from "../../devices/device.js";
import type { RawTensor } from "../../hub/index.js";
import { RotaryAttention, type RotaryAttentionOptions } from "../../nn/attention.js";
import { ExpertWeights, type ExpertMatrices } from "../../nn/expert_weights.js";
import { Embedding, Linear, RMSNorm } from "../../nn/layers.js";
import { useKernelForwardFromHub, type KernelMoeBlock } from "../../nn/kernel_hub.js";
import { Module } from "../../nn/module.js";
import { add, embedding, gatherLinear, maximum, minimum, mul, sigmoid, softmax, sum, topk } from "../../tensor/ops.js";
import { tidy } from "../../tensor/scope.js";
import type { DType } from "../../tensor/dtype.js";
import type { Tensor } from "../../tensor/tensor.js";
import { num, withDefaults, type RawConfig } from "../configuration.js";
import { DecoderLM, DecoderModel, PreNormDecoderLayer } from "../decoder_lm.js";
import { isMxfp4, mxfp4Words } from "../mxfp4.js";
import { LlamaConfig } from "./llama.js";

// ------------------------------------------------------------------ config

/** transformers' GptOssConfig defaults where they differ from Llama's. */
const GPT_OSS_DEFAULTS: RawConfig = {
  vocab_size: 201088, hidden_size: 2880, intermediate_size: 2880, num_hidden_layers: 36, num_attention_heads: 64,
  num_key_value_heads: 8, head_dim: 64, sliding_window: 128, max_position_embeddings: 131072, rms_norm_eps: 1e-5,
  attention_bias: true, rope_theta: 150000,
};

/** GptOssConfig.__post_init__'s rope when the config names none. */
const DEFAULT_ROPE = { rope_type: "yarn", factor: 32, beta_fast: 32, beta_slow: 1, truncate: false, original_max_position_embeddings: 4096 };

/** GptOssConfig: Llama's fields plus experts, layer types and the SwiGLU limit. */
export class GptOssConfig extends LlamaConfig {
  readonly numLocalExperts: number;
  readonly numExpertsPerTok: number;
  readonly layerTypes: string[];
  /** swiglu_limit (7 on the Hub; transformers' unquantized path hard-codes the same 7). */
  readonly swigluLimit: number;
  /** Expert weights stored as MXFP4 blocks and scales (quantization_config). */
  readonly mxfp4: boolean;

  constructor(raw: RawConfig) {
    const r = withDefaults(raw, GPT_OSS_DEFAULTS);
    super(r.rope_parameters || r.rope_scaling ? r : { ...r, rope_parameters: { ...DEFAULT_ROPE, rope_theta: r.rope_theta } });
    this.numLocalExperts = num(r, "num_local_experts", 128);
    this.numExpertsPerTok = num(r, "num_experts_per_tok", 4);
    this.layerTypes = Array.isArray(r.layer_types)
      ? (r.layer_types as string[])
      : Array.from({ length: this.numHiddenLayers }, (_, i) => ((i + 1) % 2 ? "sliding_attention" : "full_attention"));
    this.swigluLimit = num(r, "swiglu_limit", 7);
    this.mxfp4 = isMxfp4(r);
  }

  override attention(layerIdx: number): RotaryAttentionOptions {
    return {
      ...super.attention(layerIdx), qkvBias: this.attentionBias, oBias: this.attentionBias, sinks: true,
      window: this.layerTypes[layerIdx] === "sliding_attention" ? this.slidingWindow : 0,
    };
  }
}

// ------------------------------------------------------------------ mixture of experts

/** GptOssTopKRouter: `weight` [E, hidden] and `bias` [E]; top-k logits, softmax over those k. */
class GptOssTopKRouter extends Linear {
  constructor(hidden: number, numExperts: number, private readonly topK: number) {
    super(hidden, numExperts, true);
  }

  /** x [T, hidden] -> weights float32 [T, k] and expert indices int64 [T, k]. */
  route(x: Tensor): { weights: Tensor; indices: Tensor } {
    const { values, indices } = topk(this.forward(x), this.topK);
    return { weights: softmax(values, -1), indices };
  }
}

/** GptOssMLP: `router` and `experts` (gate_up_proj(_bias), down_proj(_bias) or their MXFP4 form). */
class GptOssMLP extends Module implements KernelMoeBlock {
  readonly router: GptOssTopKRouter;
  readonly experts: ExpertWeights;

  constructor(private readonly c: GptOssConfig) {
    super();
    const E = c.numLocalExperts, H = c.hiddenSize, I = c.intermediateSize;
    this.router = this.module("router", new GptOssTopKRouter(H, E, c.numExpertsPerTok));
    this.experts = this.module("experts", new ExpertWeights(E, [
      { name: "gate_up_proj", out: 2 * I, in: H },
      { name: "down_proj", out: H, in: I },
    ], c.mxfp4));
  }

  forward(x: Tensor): Tensor {
    return tidy(() => {
      const [B, L, H] = x.shape, T = B * L, k = this.c.numExpertsPerTok, I = this.c.intermediateSize, limit = this.c.swigluLimit;
      const flat = x.reshape(T, H);
      const { weights, indices } = this.router.route(flat);
      const rows = flat.unsqueeze(1).expand(T, k, H).reshape(T * k, H);
      const idx = indices.reshape(T * k);
      const m: ExpertMatrices = this.experts.matrices();
      const gateUp = add(gatherLinear(rows, m.weights.gate_up_proj, idx), embedding(idx, m.biases.gate_up_proj)).view(T * k, I, 2);
      const gate = minimum(gateUp.select(2, 0), limit);
      const up = maximum(minimum(gateUp.select(2, 1), limit), -limit);
      const h = mul(add(up, 1), mul(gate, sigmoid(mul(gate, 1.702))));
      const y = add(gatherLinear(h, m.weights.down_proj, idx), embedding(idx, m.biases.down_proj));
      return sum(mul(y.view(T, k, H), weights.unsqueeze(2)), 1).view(B, L, H);
    });
  }

  kernelMoe(): string {
    return "gpt-oss experts use a clamped SwiGLU (sigmoid(1.702 g) g (u + 1)) with biases on interleaved gate/up rows; the MoE kernel contract is silu(gate) * up without biases";
  }
}
useKernelForwardFromHub("MoE")(GptOssMLP);

// ------------------------------------------------------------------ causal LM

function gptOssDecoderLayer(c: GptOssConfig, layerIdx: number): PreNormDecoderLayer {
  return new PreNormDecoderLayer(
    new RotaryAttention(c.attention(layerIdx)),
    new GptOssMLP(c),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
    new RMSNorm(c.hiddenSize, c.rmsNormEps),
  );
}

export class GptOssForCausalLM extends DecoderLM<GptOssConfig, PreNormDecoderLayer> {
  constructor(raw: RawConfig, c: GptOssConfig = new GptOssConfig(raw)) {
    super(raw, c, new DecoderModel(
      new Embedding(c.vocabSize, c.hiddenSize),
      Array.from({ length: c.numHiddenLayers }, (_, i) => gptOssDecoderLayer(c, i)),
      new RMSNorm(c.hiddenSize, c.rmsNormEps),
    ));
  }

  /** MXFP4 checkpoints: the uint8 blocks and scales become the packed int32 words the experts keep. */
  override loadWeights(weights: Map<string, RawTensor>, device: Device, dtype?: DType): void {
    super.loadWeights(this.c.mxfp4 ? new Map([...weights].map(([k, t]) => [k, mxfp4Words(t)])) : weights, device, dtype);
  }
}
