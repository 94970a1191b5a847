/**
 * The decoder-only causal LM that most families share (transformers' LlamaModel +
 * LlamaForCausalLM, which Mistral, Mixtral, Qwen2/3, Qwen3-MoE, Phi-3 and Gemma 1-3 repeat):
 *
 *   model.embed_tokens -> model.layers[i](x, cos, sin, mask, cache[i]) -> model.norm -> lm_head
 *
 * A family file supplies its config, its decoder layer and its embedding/norm modules; this file
 * holds the forward loop once. Each layer runs in a tidy scope, so its temporaries are released as
 * soon as it returns.
 */
import { Linear } from "../nn/layers.js";
import { Module, ModuleList } from "../nn/module.js";
import { ropeCosSin, type RopeTables } from "../nn/rotary.js";
import { RotaryAttention } from "../nn/attention.js";
import { GatedMLP } from "../nn/mlp.js";
import { add, embedding } from "../tensor/ops.js";
import { keep, tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import type { LayerKVCache } from "./cache_utils.js";
import type { RawConfig } from "./configuration.js";
import { StaticKVCache, type KVHeads } from "./static_kv_cache.js";
import { PreTrainedModel, paddingMask, type CausalLMInputs } from "./modeling_utils.js";

/** A decoder layer: x [B, L, hidden] -> [B, L, hidden], with rotary tables cos/sin [B, L, R]. */
export interface DecoderLayer extends Module {
  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor;
}

/** A module mapping one tensor to one tensor (embedding, norm). */
export interface TensorModule extends Module {
  forward(x: Tensor): Tensor;
}

/**
 * The pre-norm residual block of Llama and most of its relatives:
 *   h = x + self_attn(input_layernorm(x)); out = h + <ffn>(post_attention_layernorm(h)).
 * `ffnName` is the checkpoint's name of the feed-forward module ("mlp"; Mixtral: "block_sparse_moe").
 */
export class PreNormDecoderLayer extends Module implements DecoderLayer {
  readonly self_attn: DecoderLayer;
  readonly ffn: TensorModule;
  readonly input_layernorm: TensorModule;
  readonly post_attention_layernorm: TensorModule;
  constructor(attention: DecoderLayer, ffn: TensorModule, inputNorm: TensorModule, postAttentionNorm: TensorModule, ffnName = "mlp") {
    super();
    this.self_attn = this.module("self_attn", attention);
    this.ffn = this.module(ffnName, ffn);
    this.input_layernorm = this.module("input_layernorm", inputNorm);
    this.post_attention_layernorm = this.module("post_attention_layernorm", postAttentionNorm);
  }

  /** A RotaryAttention / GatedMLP (not a subclass, forward not replaced) adds the residual itself, through fused ops (nn forwardResidual). */
  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: LayerKVCache | null): Tensor {
    const attn: Module = this.self_attn, ffn: Module = this.ffn;
    const h = attn instanceof RotaryAttention && attn.constructor === RotaryAttention && attn.forward === RotaryAttention.prototype.forward
      ? attn.forwardResidual(x, this.input_layernorm, cos, sin, mask, cache, x)
      : add(x, this.self_attn.forward(this.input_layernorm.forward(x), cos, sin, mask, cache));
    return ffn instanceof GatedMLP && ffn.constructor === GatedMLP ? ffn.forwardResidual(h, this.post_attention_layernorm, h)
      : add(h, this.ffn.forward(this.post_attention_layernorm.forward(h)));
  }
}

/** The config fields the shared loop reads. */
export interface DecoderLMConfig {
  vocabSize: number;
  hiddenSize: number;
  numHiddenLayers: number;
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  rope: RopeTables;
}

/** `model.*`: embed_tokens, layers.N, norm (names as in transformers' state_dict). */
export class DecoderModel<L extends DecoderLayer> extends Module {
  readonly embed_tokens: TensorModule;
  readonly layers: ModuleList<L>;
  readonly norm: TensorModule;
  constructor(embed: TensorModule, layers: L[], norm: TensorModule) {
    super();
    this.embed_tokens = this.module("embed_tokens", embed);
    this.layers = this.module("layers", new ModuleList(layers));
    this.norm = this.module("norm", norm);
  }
}

/** A decoder-only causal LM with rotary positions: forward(inputs) -> float32 logits [B, L', vocab]. */
export class DecoderLM<C extends DecoderLMConfig, L extends DecoderLayer> extends PreTrainedModel {
  readonly model: DecoderModel<L>;
  readonly lm_head: Linear;

  constructor(raw: RawConfig, readonly c: C, model: DecoderModel<L>) {
    super(raw);
    this.model = this.module("model", model);
    this.lm_head = this.module("lm_head", new Linear(c.hiddenSize, c.vocabSize, false));
  }

  get numLayers(): number { return this.c.numHiddenLayers; }
  get maxPositions(): number { return this.c.maxPositionEmbeddings; }
  protected override tiedWeights(): Record<string, string> {
    return this.c.tieWordEmbeddings ? { "lm_head.weight": "model.embed_tokens.weight" } : {};
  }

  /** The rotary tables layer `layer` uses (Gemma 3: local or global by layer type). */
  protected ropeFor(_layer: number): RopeTables {
    return this.c.rope;
  }

  /** A last transform of the logits (Gemma 2: final soft-capping). */
  protected finalLogits(logits: Tensor): Tensor {
    return logits;
  }

  override staticStepUnsupported(): string | null {
    const name = this.constructor.name;
    if (this.cacheRecomputeLength() !== undefined) return `${name} recomputes its KV cache during generation (LongRoPE)`;
    for (const [i, layer] of this.model.layers.items.entries()) {
      const attn = (layer as { self_attn?: unknown }).self_attn;
      if (!(attn instanceof RotaryAttention)) return `${name}'s layer ${i} attention is not a rotary attention over a KV cache`;
      if (attn.options.sinks) return `${name} uses attention sinks`;
      const rope = this.ropeFor(i);
      if (rope.dynamic || rope.long) return `${name} uses ${rope.dynamic ? "dynamic" : "longrope"} rotary scaling, whose tables depend on the sequence length`;
    }
    return null;
  }

  override kvHeads(): KVHeads[] {
    return this.model.layers.items.map((layer) => {
      const o = ((layer as unknown as { self_attn: RotaryAttention }).self_attn).options;
      return { numKvHeads: o.numKvHeads, headDim: o.headDim };
    });
  }

  /** Rotary tables of every position below `length`, [length, R], built once per length bucket. */
  private readonly staticRope = new Map<RopeTables, { cos: Tensor; sin: Tensor }>();
  override prepareStaticStep(length: number): void {
    this.model.layers.items.forEach((_, i) => this.staticRopeTables(this.ropeFor(i), length));
  }
  private staticRopeTables(rope: RopeTables, length: number): { cos: Tensor; sin: Tensor } {
    let t = this.staticRope.get(rope);
    if (!t || t.cos.shape[0] < length || t.cos.device !== this.device) {
      const { cos, sin } = ropeCosSin(rope, [Array.from({ length }, (_, i) => i)], this.device);
      t = { cos: keep(cos.view(length, rope.dim)), sin: keep(sin.view(length, rope.dim)) };
      this.staticRope.set(rope, t);
    }
    return t;
  }

  forward({ inputIds, positionIds, attentionMask, cache, logitsToKeep = 0, positions, logitsRows }: CausalLMInputs): Tensor {
    if (positions && !(cache instanceof StaticKVCache)) throw new Error("forward: `positions` (a graph-ready step) needs a StaticKVCache");
    const tables = new Map<RopeTables, { cos: Tensor; sin: Tensor }>();
    const rotary = (layer: number) => {
      const rope = this.ropeFor(layer);
      let t = tables.get(rope);
      if (!t && positions) {
        // Gathered by the positions tensor, so the step depends on positions only through it.
        const all = this.staticRopeTables(rope, (cache as StaticKVCache).capacity);
        t = { cos: embedding(positions, all.cos), sin: embedding(positions, all.sin) };
        tables.set(rope, t);
      }
      if (!t) tables.set(rope, (t = ropeCosSin(rope, positionIds, this.device)));
      return t;
    };
    const mask = paddingMask(attentionMask, this.device);
    let x = this.model.embed_tokens.forward(inputIds);
    this.model.layers.items.forEach((layer, i) => {
      const { cos, sin } = rotary(i);
      const input = x;
      x = tidy(() => layer.forward(input, cos, sin, mask, cache?.layers[i] ?? null));
    });
    const [B, L, H] = x.shape;
    if (logitsRows && L > 1) x = embedding(logitsRows, x.reshape(B * L, H)); // [B, 1, H]: each row's chosen position
    else if (logitsToKeep > 0 && logitsToKeep < L) x = x.narrow(1, L - logitsToKeep, logitsToKeep);
    return this.finalLogits(this.lm_head.forward(this.model.norm.forward(x)));
  }
}
