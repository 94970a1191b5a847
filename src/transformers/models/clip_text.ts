/**
 * CLIPTextModel (transformers' models/clip/modeling_clip.py: CLIPTextTransformer + CLIPTextModel),
 * the text encoder of Stable Diffusion and FLUX:
 *
 *   token_embedding(ids) + position_embedding(0..L-1)
 *     -> N x [x + self_attn(layer_norm1(x)) (causal); x + mlp(layer_norm2(x))] -> final_layer_norm
 *
 * `lastHiddenState` is the output of final_layer_norm; `poolerOutput` is its row at the end token:
 * argmax(ids) when config eos_token_id is 2 (the legacy configs), else the first eos_token_id.
 * Checkpoints name the tensors `text_model.…` (transformers 4) or without that prefix
 * (transformers 5's CLIPTextModel); both load.
 */
import type { Device } from "../../devices/device.js";
import { openDevice } from "../../devices/registry.js";
import type { RawTensor } from "../../hub/index.js";
import { activation, type Activation } from "../../nn/activations.js";
import { Embedding, LayerNorm, Linear } from "../../nn/layers.js";
import { Module, ModuleList } from "../../nn/module.js";
import { arange, tensor } from "../../tensor/creation.js";
import type { DType } from "../../tensor/dtype.js";
import { add, cat, scaledDotProductAttention } from "../../tensor/ops.js";
import { tidy } from "../../tensor/scope.js";
import type { Tensor } from "../../tensor/tensor.js";
import { num, str, type RawConfig } from "../configuration.js";
import { loadModuleWeights } from "../modeling_utils.js";

/** CLIPTextConfig fields with transformers' defaults. */
export class CLIPTextConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly maxPositionEmbeddings: number;
  readonly hiddenAct: string;
  readonly layerNormEps: number;
  readonly eosTokenId: number;

  constructor(raw: RawConfig) {
    this.vocabSize = num(raw, "vocab_size", 49408);
    this.hiddenSize = num(raw, "hidden_size", 512);
    this.intermediateSize = num(raw, "intermediate_size", 2048);
    this.numHiddenLayers = num(raw, "num_hidden_layers", 12);
    this.numAttentionHeads = num(raw, "num_attention_heads", 8);
    this.maxPositionEmbeddings = num(raw, "max_position_embeddings", 77);
    this.hiddenAct = str(raw, "hidden_act", "quick_gelu");
    this.layerNormEps = num(raw, "layer_norm_eps", 1e-5);
    this.eosTokenId = num(raw, "eos_token_id", 2);
    if (this.hiddenSize % this.numAttentionHeads) {
      throw new Error(`CLIPTextModel: hidden_size (${this.hiddenSize}) must be divisible by num_attention_heads (${this.numAttentionHeads})`);
    }
  }
}

class CLIPAttention extends Module {
  readonly q_proj: Linear;
  readonly k_proj: Linear;
  readonly v_proj: Linear;
  readonly out_proj: Linear;
  constructor(private readonly c: CLIPTextConfig) {
    super();
    const E = c.hiddenSize;
    this.q_proj = this.module("q_proj", new Linear(E, E));
    this.k_proj = this.module("k_proj", new Linear(E, E));
    this.v_proj = this.module("v_proj", new Linear(E, E));
    this.out_proj = this.module("out_proj", new Linear(E, E));
  }
  /** x [B, L, E] -> [B, L, E], causal (CLIP's text mask). */
  forward(x: Tensor): Tensor {
    const [B, L, E] = x.shape;
    const H = this.c.numAttentionHeads, D = E / H;
    const heads = (t: Tensor) => t.view(B, L, H, D).transpose(1, 2);
    const o = scaledDotProductAttention(heads(this.q_proj.forward(x)), heads(this.k_proj.forward(x)), heads(this.v_proj.forward(x)), { isCausal: true });
    return this.out_proj.forward(o.transpose(1, 2).reshape(B, L, E));
  }
}

class CLIPMLP extends Module {
  readonly fc1: Linear;
  readonly fc2: Linear;
  private readonly act: Activation;
  constructor(c: CLIPTextConfig) {
    super();
    this.fc1 = this.module("fc1", new Linear(c.hiddenSize, c.intermediateSize));
    this.fc2 = this.module("fc2", new Linear(c.intermediateSize, c.hiddenSize));
    this.act = activation(c.hiddenAct);
  }
  forward(x: Tensor): Tensor {
    return this.fc2.forward(this.act(this.fc1.forward(x)));
  }
}

class CLIPEncoderLayer extends Module {
  readonly self_attn: CLIPAttention;
  readonly layer_norm1: LayerNorm;
  readonly mlp: CLIPMLP;
  readonly layer_norm2: LayerNorm;
  constructor(c: CLIPTextConfig) {
    super();
    this.self_attn = this.module("self_attn", new CLIPAttention(c));
    this.layer_norm1 = this.module("layer_norm1", new LayerNorm(c.hiddenSize, c.layerNormEps));
    this.mlp = this.module("mlp", new CLIPMLP(c));
    this.layer_norm2 = this.module("layer_norm2", new LayerNorm(c.hiddenSize, c.layerNormEps));
  }
  forward(x: Tensor): Tensor {
    const h = add(x, this.self_attn.forward(this.layer_norm1.forward(x)));
    return add(h, this.mlp.forward(this.layer_norm2.forward(h)));
  }
}

class CLIPTextEmbeddings extends Module {
  readonly token_embedding: Embedding;
  readonly position_embedding: Embedding;
  constructor(c: CLIPTextConfig) {
    super();
    this.token_embedding = this.module("token_embedding", new Embedding(c.vocabSize, c.hiddenSize));
    this.position_embedding = this.module("position_embedding", new Embedding(c.maxPositionEmbeddings, c.hiddenSize));
  }
}

class CLIPEncoder extends Module {
  readonly layers: ModuleList<CLIPEncoderLayer>;
  constructor(c: CLIPTextConfig) {
    super();
    this.layers = this.module("layers", new ModuleList(Array.from({ length: c.numHiddenLayers }, () => new CLIPEncoderLayer(c))));
  }
}

/** Output of {@link CLIPTextModel.forward}. */
export interface CLIPTextOutput {
  /** float32 [B, L, hidden]: after final_layer_norm. */
  lastHiddenState: Tensor;
  /** float32 [B, hidden]: lastHiddenState at each row's end token. */
  poolerOutput: Tensor;
}

/** CLIP's text transformer; parameter names as transformers 5 saves CLIPTextModel. */
export class CLIPTextModel extends Module {
  readonly c: CLIPTextConfig;
  readonly embeddings: CLIPTextEmbeddings;
  readonly encoder: CLIPEncoder;
  readonly final_layer_norm: LayerNorm;
  device!: Device;

  constructor(readonly config: RawConfig) {
    super();
    this.c = new CLIPTextConfig(config);
    this.embeddings = this.module("embeddings", new CLIPTextEmbeddings(this.c));
    this.encoder = this.module("encoder", new CLIPEncoder(this.c));
    this.final_layer_norm = this.module("final_layer_norm", new LayerNorm(this.c.hiddenSize, this.c.layerNormEps));
  }

  /**
   * Load a checkpoint (`text_model.`-prefixed or not) onto `device`, floating weights converted
   * to `dtype` (undefined: as stored). Throws WeightLoadError for missing/unexpected/mis-shaped weights.
   */
  loadWeights(weights: Map<string, RawTensor>, device: Device, dtype?: DType): void {
    const renamed = new Map([...weights].map(([k, v]) => [k.startsWith("text_model.") ? k.slice("text_model.".length) : k, v]));
    loadModuleWeights(this, renamed, device, dtype, {}, [/(^|\.)position_ids$/]);
    this.device = device;
  }

  override async to(device: string | Device, dtype?: DType): Promise<this> {
    await super.to(device, dtype);
    this.device = await openDevice(device);
    return this;
  }

  /**
   * ids [B][L] (host token ids, L <= max_position_embeddings, no attention mask as diffusers
   * calls it) -> last hidden state and pooled output. Throws RangeError for ids outside the vocab
   * or a sequence longer than the position table.
   */
  forward(ids: number[][]): CLIPTextOutput {
    const B = ids.length, L = ids[0]?.length ?? 0;
    if (L > this.c.maxPositionEmbeddings || ids.some((r) => r.length !== L)) {
      throw new RangeError(`CLIPTextModel: expected ${B} rows of equal length <= ${this.c.maxPositionEmbeddings}, got lengths [${ids.map((r) => r.length)}]`);
    }
    for (const row of ids) for (const id of row) {
      if (!Number.isInteger(id) || id < 0 || id >= this.c.vocabSize) throw new RangeError(`CLIPTextModel: token id ${id} is not in [0, ${this.c.vocabSize})`);
    }
    const idsT = tensor(ids.flat(), { dtype: "int64", device: this.device, shape: [B, L] });
    let x = tidy(() => add(this.embeddings.token_embedding.forward(idsT), this.embeddings.position_embedding.forward(arange(0, L, 1, { device: this.device }))));
    for (const layer of this.encoder.layers.items) {
      const input = x;
      x = tidy(() => layer.forward(input));
    }
    const last = this.final_layer_norm.forward(x);
    const eos = this.c.eosTokenId;
    const rows = ids.map((r, b) => {
      const at = eos === 2 ? r.indexOf(Math.max(...r)) : r.indexOf(eos);
      return last.select(0, b).narrow(0, at < 0 ? 0 : at, 1);
    });
    return { lastHiddenState: last, poolerOutput: cat(rows, 0) };
  }
}
