/**
 * GPT-2 (transformers' models/gpt2/modeling_gpt2.py + configuration_gpt2.py): learned position
 * embeddings, pre-LayerNorm blocks, fused c_attn (q, k, v) and Conv1D projections whose weights are
 * stored [in, out], and an lm_head tied to the token embeddings.
 *
 *   wte(ids) + wpe(positions) -> N x [x + attn(ln_1(x)); x + mlp(ln_2(x))] -> ln_f -> lm_head
 */
import { activation, type Activation } from "../../nn/activations.js";
import { causalAttention } from "../../nn/attention.js";
import { Embedding, LayerNorm, Linear } from "../../nn/layers.js";
import { Module, ModuleList, type Parameter } from "../../nn/module.js";
import { add, matmul } from "../../tensor/ops.js";
import { tidy } from "../../tensor/scope.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { RawTensor } from "../../hub/index.js";
import type { Device } from "../../devices/device.js";
import type { DType } from "../../tensor/dtype.js";
import type { LayerKVCache } from "../cache_utils.js";
import { bool, num, str, type RawConfig } from "../configuration.js";
import { PreTrainedModel, paddingMask, type CausalLMInputs } from "../modeling_utils.js";

// ------------------------------------------------------------------ config

/** GPT2Config fields (config.json names n_embd, n_head, n_layer, n_positions, …) with transformers' defaults. */
export class GPT2Config {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly maxPositionEmbeddings: number;
  readonly innerSize: number;
  readonly activationFunction: string;
  readonly layerNormEpsilon: number;
  readonly scaleAttnWeights: boolean;
  readonly scaleAttnByInverseLayerIdx: boolean;
  readonly tieWordEmbeddings: boolean;

  constructor(raw: RawConfig) {
    this.vocabSize = num(raw, "vocab_size", 50257);
    this.hiddenSize = num(raw, "n_embd", 768);
    this.numHiddenLayers = num(raw, "n_layer", 12);
    this.numAttentionHeads = num(raw, "n_head", 12);
    this.maxPositionEmbeddings = num(raw, "n_positions", 1024);
    this.innerSize = num(raw, "n_inner", 4 * this.hiddenSize);
    this.activationFunction = str(raw, "activation_function", "gelu_new");
    this.layerNormEpsilon = num(raw, "layer_norm_epsilon", 1e-5);
    this.scaleAttnWeights = bool(raw, "scale_attn_weights", true);
    this.scaleAttnByInverseLayerIdx = bool(raw, "scale_attn_by_inverse_layer_idx", false);
    this.tieWordEmbeddings = bool(raw, "tie_word_embeddings", true);
    if (this.hiddenSize % this.numAttentionHeads) {
      throw new Error(`GPT2: n_embd (${this.hiddenSize}) must be divisible by n_head (${this.numAttentionHeads})`);
    }
  }
}

// ------------------------------------------------------------------ layers

/** transformers' Conv1D: y = x W + b with W stored [in, out] (used as stored, no transpose copy). */
class Conv1D extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter;
  constructor(nf: number, nx: number) {
    super();
    this.weight = this.param("weight", [nx, nf]);
    this.bias = this.param("bias", [nf]);
  }
  forward(x: Tensor): Tensor {
    return add(matmul(x, this.weight.value), this.bias.value);
  }
}

class GPT2Attention extends Module {
  readonly c_attn: Conv1D;
  readonly c_proj: Conv1D;
  private readonly scaling: number;
  constructor(private readonly c: GPT2Config, layerIdx: number) {
    super();
    const E = c.hiddenSize;
    this.c_attn = this.module("c_attn", new Conv1D(3 * E, E));
    this.c_proj = this.module("c_proj", new Conv1D(E, E));
    const headDim = E / c.numAttentionHeads;
    this.scaling = (c.scaleAttnWeights ? headDim ** -0.5 : 1) / (c.scaleAttnByInverseLayerIdx ? layerIdx + 1 : 1);
  }

  forward(x: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor {
    const [B, L, E] = x.shape;
    const H = this.c.numAttentionHeads;
    const [q, k, v] = this.c_attn.forward(x).split(E, 2).map((t) => t.view(B, L, H, E / H));
    return this.c_proj.forward(causalAttention(q, k, v, cache, { scale: this.scaling, mask }));
  }
}

class GPT2MLP extends Module {
  readonly c_fc: Conv1D;
  readonly c_proj: Conv1D;
  private readonly act: Activation;
  constructor(c: GPT2Config) {
    super();
    this.c_fc = this.module("c_fc", new Conv1D(c.innerSize, c.hiddenSize));
    this.c_proj = this.module("c_proj", new Conv1D(c.hiddenSize, c.innerSize));
    this.act = activation(c.activationFunction);
  }
  forward(x: Tensor): Tensor {
    return this.c_proj.forward(this.act(this.c_fc.forward(x)));
  }
}

class GPT2Block extends Module {
  readonly ln_1: LayerNorm;
  readonly attn: GPT2Attention;
  readonly ln_2: LayerNorm;
  readonly mlp: GPT2MLP;
  constructor(c: GPT2Config, layerIdx: number) {
    super();
    this.ln_1 = this.module("ln_1", new LayerNorm(c.hiddenSize, c.layerNormEpsilon));
    this.attn = this.module("attn", new GPT2Attention(c, layerIdx));
    this.ln_2 = this.module("ln_2", new LayerNorm(c.hiddenSize, c.layerNormEpsilon));
    this.mlp = this.module("mlp", new GPT2MLP(c));
  }

  forward(x: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor {
    const h = add(this.attn.forward(this.ln_1.forward(x), mask, cache), x);
    return add(h, this.mlp.forward(this.ln_2.forward(h)));
  }
}

class GPT2Model extends Module {
  readonly wte: Embedding;
  readonly wpe: Embedding;
  readonly h: ModuleList<GPT2Block>;
  readonly ln_f: LayerNorm;
  constructor(c: GPT2Config) {
    super();
    this.wte = this.module("wte", new Embedding(c.vocabSize, c.hiddenSize));
    this.wpe = this.module("wpe", new Embedding(c.maxPositionEmbeddings, c.hiddenSize));
    this.h = this.module("h", new ModuleList(Array.from({ length: c.numHiddenLayers }, (_, i) => new GPT2Block(c, i))));
    this.ln_f = this.module("ln_f", new LayerNorm(c.hiddenSize, c.layerNormEpsilon));
  }
}

// ------------------------------------------------------------------ causal LM

export class GPT2LMHeadModel extends PreTrainedModel {
  readonly c: GPT2Config;
  readonly transformer: GPT2Model;
  readonly lm_head: Linear;

  constructor(raw: RawConfig) {
    super(raw);
    this.c = new GPT2Config(raw);
    this.transformer = this.module("transformer", new GPT2Model(this.c));
    this.lm_head = this.module("lm_head", new Linear(this.c.hiddenSize, this.c.vocabSize, false));
  }

  get numLayers(): number { return this.c.numHiddenLayers; }
  get maxPositions(): number { return this.c.maxPositionEmbeddings; }
  /** Learned position embeddings (wpe): positions past n_positions do not exist. */
  override get positionLimit(): number { return this.c.maxPositionEmbeddings; }
  protected override tiedWeights(): Record<string, string> {
    return this.c.tieWordEmbeddings ? { "lm_head.weight": "transformer.wte.weight" } : {};
  }
  /** The causal-mask buffers older checkpoints store (attn.bias, attn.masked_bias). */
  protected override ignoredKeys(): RegExp[] {
    return [/\.attn\.(bias|masked_bias)$/];
  }

  /**
   * Checkpoints saved from the bare GPT2Model (e.g. openai-community/gpt2) name weights without
   * the "transformer." prefix; transformers adds it (base_model_prefix), and so does this.
   */
  override loadWeights(weights: Map<string, RawTensor>, device: Device, dtype?: DType): void {
    const bare = ![...weights.keys()].some((k) => k.startsWith("transformer."));
    const named = bare ? new Map([...weights].map(([k, t]) => [k === "lm_head.weight" ? k : `transformer.${k}`, t])) : weights;
    super.loadWeights(named, device, dtype);
  }

  forward({ inputIds, positionIds, attentionMask, cache, logitsToKeep = 0 }: CausalLMInputs): Tensor {
    const mask = paddingMask(attentionMask, this.device);
    const t = this.transformer;
    let x = add(t.wte.forward(inputIds), t.wpe.forward(this.idsTensor(positionIds)));
    t.h.items.forEach((block, i) => {
      const input = x;
      x = tidy(() => block.forward(input, mask, cache?.layers[i] ?? null)); // per-layer memory scope
    });
    const L = x.shape[1];
    if (logitsToKeep > 0 && logitsToKeep < L) x = x.narrow(1, L - logitsToKeep, logitsToKeep);
    return this.lm_head.forward(t.ln_f.forward(x));
  }
}
