/**
 * PreTrainedModel: the base of every causal LM (transformers' modeling_utils.py): the forward
 * contract the generation loop relies on, and loading a checkpoint's tensors into the module tree
 * by name, with clear errors for missing, unexpected and mis-shaped weights.
 */
import type { Device } from "../devices/device.js";
import type { RawTensor } from "../hub/index.js";
import { Module, ShapeMismatchError } from "../nn/module.js";
import { fromBytes } from "../tensor/creation.js";
import type { DType } from "../tensor/dtype.js";
import { isFloating } from "../tensor/dtype.js";
import { encode } from "../tensor/host.js";
import { Tensor } from "../tensor/tensor.js";
import type { KVCache } from "./cache_utils.js";
import type { KVHeads } from "./static_kv_cache.js";
import { applyCheckpointLayout, type CheckpointLayout } from "./checkpoint_layout.js";
import type { RawConfig } from "./configuration.js";
import type { FinishReason, GenerationOptions } from "./generation/configuration_utils.js";
import { generate, generateStream, type GenerationStream } from "./generation/utils.js";

/** Inputs of one forward step, fully prepared by the caller (the generation loop or `logits`). */
export interface CausalLMInputs {
  /** Token ids [B, L], int64 or int32, on the model's device. */
  inputIds: Tensor;
  /** Absolute position of every input token [B][L]. */
  positionIds: number[][];
  /** 1 = real token, 0 = padding, over past + new positions [B][past + L]; null = no padding. */
  attentionMask: number[][] | null;
  /** KV cache to read and append to; null = no cache (a single full forward). */
  cache: KVCache | null;
  /** Compute logits for only the last `logitsToKeep` positions (0 = all). */
  logitsToKeep?: number;
  /**
   * Graph-ready step (compiled generation, with a StaticKVCache): int32 positions [B, L] on the
   * device, used for the rotary tables instead of `positionIds` (then ignored).
   */
  positions?: Tensor;
  /**
   * Graph-ready step: int32 [B, 1] flat indices into the B * L positions whose logits to compute
   * (a right-padded prompt's last real token per row); the result is [B, 1, vocab]. With L = 1 every row is chosen.
   */
  logitsRows?: Tensor;
}

export class WeightLoadError extends Error {}

export abstract class PreTrainedModel extends Module {
  /** The model's device (set by loading and by `to`). */
  device!: Device;
  /** generation_config.json defaults (snake_case, as stored). */
  generationConfig: Record<string, unknown> = {};

  constructor(readonly config: RawConfig) {
    super();
  }

  /** Number of decoder layers (the KV cache gets one entry per layer). */
  abstract get numLayers(): number;
  /**
   * config max_position_embeddings (GPT-2: n_positions). Rotary models run past it; it caps only
   * generate()'s default length, as in transformers.
   */
  abstract get maxPositions(): number;
  /** Positions the model can embed at all: learned position embeddings' size; undefined (rotary) = no limit. */
  get positionLimit(): number | undefined { return undefined; }
  /** Next-token logits: float32 [B, L', vocab] with L' = logitsToKeep || L. */
  abstract forward(inputs: CausalLMInputs): Tensor;

  /**
   * Parameters that share another's tensor when the checkpoint omits them
   * (tie_word_embeddings: {"lm_head.weight": "model.embed_tokens.weight"}).
   */
  protected tiedWeights(): Record<string, string> { return {}; }
  /**
   * A cache length at which generation drops the KV cache and recomputes it from the whole
   * sequence (Phi-3 LongRoPE at original_max_position_embeddings); undefined = never.
   */
  cacheRecomputeLength(): number | undefined { return undefined; }
  /**
   * Why this model has no graph-ready static decode step (CausalLMInputs.positions with a
   * StaticKVCache), or null when it has one; compiled generation falls back to eager when not null.
   */
  staticStepUnsupported(): string | null { return `${this.constructor.name} has no static (graph-ready) decode step`; }
  /** Key/value heads of every layer's KV cache, for a StaticKVCache (only when staticStepUnsupported() is null). */
  kvHeads(): KVHeads[] { throw new Error(`${this.constructor.name} has no static KV cache layout`); }
  /** Build what a graph-ready step of up to `length` positions reads besides its tensors (rotary tables), outside any trace. */
  prepareStaticStep(_length: number): void {}
  /** Checkpoint keys that are not weights of this model and are skipped (e.g. rotary buffers). */
  protected ignoredKeys(): RegExp[] { return [/\.rotary_emb\.inv_freq$/]; }
  /** How the family's Hub files name their tensors (wrapper prefixes, skipped towers); null = as the module tree. */
  protected checkpointLayout(): CheckpointLayout | null { return null; }

  /**
   * The model's floating dtype, as transformers' `model.dtype`: that of its first floating
   * parameter (bfloat16 for a bfloat16 checkpoint loaded as stored); float32 when it has none.
   * The KV cache of generate is kept in it.
   */
  get dtype(): "float32" | "float16" | "bfloat16" {
    for (const [, p] of this.namedParameters()) {
      const d = p.loaded ? p.value.dtype : undefined;
      if (d === "float32" || d === "float16" || d === "bfloat16") return d;
    }
    return "float32";
  }

  override async to(device: string | Device, dtype?: DType): Promise<this> {
    await super.to(device, dtype);
    this.device = this.stateDict().values().next().value!.device;
    return this;
  }

  /**
   * Load `weights` (name -> raw checkpoint tensor) into the parameters: each tensor is converted to
   * `dtype` (floating weights only; undefined keeps the stored dtype, as transformers' dtype="auto")
   * and placed on `device` (on cpu, a tensor kept as stored is a view of the file buffer, no copy).
   * The family's checkpointLayout is applied first (renames, knowingly skipped tensors, fused experts).
   * Throws WeightLoadError naming missing keys, unexpected keys and shape mismatches.
   */
  loadWeights(weights: Map<string, RawTensor>, device: Device, dtype?: DType): void {
    loadModuleWeights(this, applyCheckpointLayout(weights, this.checkpointLayout(), this.constructor.name), device, dtype, this.tiedWeights(), this.ignoredKeys());
    this.device = device;
  }

  /**
   * Generate continuations (transformers' generate): `inputIds` is one prompt (number[]) or a
   * batch (number[][], left-padded with `attentionMask` when lengths differ). Returns the full
   * sequences (prompt then new tokens), in the same form as the input; with
   * `returnDictInGenerate: true`, `{ sequences, finishReason }` (per row for a batch), where
   * finishReason is "eos", "stop_string" or "length". Options left unset come from
   * generation_config.json, then transformers' defaults; an unknown option name throws.
   */
  async generate(inputIds: number[], opts?: GenerationOptions & { returnDictInGenerate?: false }): Promise<number[]>;
  async generate(inputIds: number[][], opts?: GenerationOptions & { returnDictInGenerate?: false }): Promise<number[][]>;
  async generate(inputIds: number[], opts: GenerationOptions & { returnDictInGenerate: true }): Promise<{ sequences: number[]; finishReason: FinishReason }>;
  async generate(inputIds: number[][], opts: GenerationOptions & { returnDictInGenerate: true }): Promise<{ sequences: number[][]; finishReason: FinishReason[] }>;
  async generate(inputIds: number[], opts?: GenerationOptions): Promise<number[] | { sequences: number[]; finishReason: FinishReason }>;
  async generate(inputIds: number[][], opts?: GenerationOptions): Promise<number[][] | { sequences: number[][]; finishReason: FinishReason[] }>;
  async generate(inputIds: number[] | number[][], opts: GenerationOptions = {}): Promise<unknown> {
    const batch = Array.isArray(inputIds[0]);
    const out = await generate(this, this.generationConfig, batch ? (inputIds as number[][]) : [inputIds as number[]], opts);
    if (opts.returnDictInGenerate) return batch ? out : { sequences: out.sequences[0], finishReason: out.finishReason[0] };
    return batch ? out.sequences : out.sequences[0];
  }

  /**
   * Stream generation: yields the new token of every row per step ([id] for a single prompt given
   * as a flat list of ids); `finishReasons` says which rows ended and why (see generateStream).
   * Throws at the call for bad options or inputs.
   */
  generateStream(inputIds: number[] | number[][], opts: GenerationOptions = {}): GenerationStream {
    const batch = Array.isArray(inputIds[0]) ? (inputIds as number[][]) : [inputIds as number[]];
    return generateStream(this, this.generationConfig, batch, opts);
  }

  /** generate()'s `compile` when a call does not set it (set by compile()). */
  compileGeneration: boolean | "eager" = false;

  /**
   * Make generate() and generateStream() run prefill and decode compiled on a static KV cache
   * (GenerationOptions.compile, for calls that do not set it); graphs are built on first use.
   * Throws naming the reason when the model has no static decode step (e.g. linear attention).
   */
  async compile(): Promise<this> {
    const why = this.staticStepUnsupported();
    if (why) throw new Error(`compile: ${why}; generate eagerly instead`);
    this.compileGeneration = true;
    return this;
  }

  /** Throw a RangeError naming the first id that is not an integer in [0, vocab_size). */
  checkIds(ids: number[][]): void {
    const vocab = typeof this.config.vocab_size === "number" ? this.config.vocab_size : Infinity;
    ids.forEach((row, b) => row.forEach((id, i) => {
      if (!Number.isInteger(id) || id < 0 || id >= vocab) {
        throw new RangeError(`token id ${JSON.stringify(id)} at [${b}][${i}] is not an integer in [0, ${vocab}) (the model's vocab_size)`);
      }
    }));
  }

  /** Upload host token ids [B][L] as an int64 tensor on the model's device. */
  idsTensor(ids: number[][]): Tensor {
    const B = ids.length, L = ids[0]?.length ?? 0;
    return fromBytes(encode(ids.flat(), "int64"), "int64", [B, L], this.device);
  }

  /**
   * Logits of a full forward pass without cache: ids [B][L] (optionally left-padded with
   * attentionMask) -> float32 [B, L, vocab]; a flat number[] is one sequence. Positions follow
   * transformers: cumsum(mask) - 1. Throws TypeError for anything but lists of token ids.
   */
  logits(ids: number[][] | number[], attentionMask?: number[][]): Tensor {
    if (!Array.isArray(ids)) throw new TypeError(`logits: expected token ids as number[][] (one row per sequence) or number[], got ${ids === null ? "null" : typeof ids === "object" ? (ids as object).constructor?.name ?? "an object" : typeof ids}`);
    if (!Array.isArray(ids[0])) ids = [ids as number[]];
    const rows = ids as number[][];
    if (!rows.every(Array.isArray)) throw new TypeError("logits: every row of ids must be a number[] of token ids");
    this.checkIds(rows);
    return this.forward({
      inputIds: this.idsTensor(rows),
      positionIds: positionsFromMask(attentionMask ?? rows.map((r) => r.map(() => 1)), 0),
      attentionMask: attentionMask ?? null,
      cache: null,
    });
  }
}

/**
 * Load `weights` (name -> raw checkpoint tensor) into the parameters of `module` (any Module whose
 * dotted parameter names equal the checkpoint's): each floating tensor is converted to `dtype`
 * (undefined keeps the stored dtype) and placed on `device`. `tied` maps a parameter to the
 * checkpoint tensor it shares when its own is absent; `ignored` keys are skipped.
 * Throws WeightLoadError naming missing keys, unexpected keys and shape mismatches.
 */
export function loadModuleWeights(module: Module, weights: Map<string, RawTensor>, device: Device, dtype?: DType,
  tied: Record<string, string> = {}, ignored: RegExp[] = []): void {
    const params = new Map(module.namedParameters());
    const missing = [...params.keys()].filter((n) => !weights.has(n) && !(tied[n] && weights.has(tied[n])));
    const unexpected = [...weights.keys()].filter((n) => !params.has(n) && !ignored.some((r) => r.test(n)));
    // Both lists in one message: a renamed tensor shows up as one missing and one unexpected name.
    const problems = [
      missing.length ? `is missing ${missing.length} weight(s) of ${module.constructor.name}: ${listNames(missing)}` : "",
      unexpected.length ? `has ${unexpected.length} unexpected weight(s) for ${module.constructor.name}: ${listNames(unexpected)}` : "",
    ].filter(Boolean);
    if (problems.length) throw new WeightLoadError(`checkpoint ${problems.join("; and ")}`);
    const loaded = new Map<string, Tensor>();
    for (const [name, p] of params) {
      const raw = weights.get(name) ?? weights.get(tied[name])!;
      const key = weights.has(name) ? name : tied[name];
      let t = loaded.get(key);
      if (!t) {
        if (p.dtype) {
          // A fixed-dtype parameter: as stored, or converted between floating dtypes.
          const convertible = raw.dtype !== "uint8" && raw.dtype !== "float8_e4m3fn" && isFloating(raw.dtype) && isFloating(p.dtype);
          if (raw.dtype !== p.dtype && !convertible) throw new WeightLoadError(`weight '${key}' is stored as ${raw.dtype}; ${module.constructor.name} expects ${p.dtype}`);
          t = fromBytes(raw.bytes, raw.dtype as DType, raw.shape, "cpu").to(device, p.dtype);
        } else {
          if (raw.dtype === "uint8" || raw.dtype === "float8_e4m3fn" || !isFloating(raw.dtype)) throw new WeightLoadError(`weight '${key}' is stored as ${raw.dtype}; ${module.constructor.name} expects a floating dtype (float32, float16 or bfloat16)`);
          t = fromBytes(raw.bytes, raw.dtype, raw.shape, "cpu").to(device, dtype ?? raw.dtype);
        }
        loaded.set(key, t);
      }
      try {
        p.set(t);
      } catch (e) {
        if (e instanceof ShapeMismatchError) throw new WeightLoadError(`shape mismatch for weight '${name}': checkpoint has [${raw.shape}], ${module.constructor.name} expects [${p.shape}] (from config.json)`);
        throw e;
      }
    }
}

/** transformers' position ids for (left-)padded input: cumsum(mask) - 1, with 1 at padding. */
export function positionsFromMask(mask: number[][], past: number): number[][] {
  return mask.map((row) => {
    let seen = 0;
    const all = row.map((m) => (m ? seen++ : 1));
    return all.slice(past);
  });
}

function listNames(names: string[]): string {
  return names.slice(0, 8).join(", ") + (names.length > 8 ? `, … (${names.length - 8} more)` : "");
}

/** Additive padding mask [B, 1, 1, Lk] (0 = attend, -inf = padding), or null when nothing is padded. */
export function paddingMask(attentionMask: number[][] | null, device: Device): Tensor | null {
  if (!attentionMask || attentionMask.every((r) => r.every((m) => m))) return null;
  const B = attentionMask.length, Lk = attentionMask[0].length;
  const values = attentionMask.flat().map((m) => (m ? 0 : -Infinity));
  return fromBytes(encode(values, "float32"), "float32", [B, 1, 1, Lk], device);
}
