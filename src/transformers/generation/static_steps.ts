/**
 * The forwards of compiled generation: prefill and decode as one graph-ready step function on a
 * StaticKVCache, so a traced graph is reused (transformers' generate with
 * cache_implementation="static" under torch.compile, and serving engines' prompt-length buckets).
 *
 * - The step's only inputs are tensors: ids [B, L] int64, positions [B, L], slots [B * L],
 *   rows [B * L], block tables [B, 1], logit rows [B, 1] (int32) and the KV buffers it writes in
 *   place. A decode step (L = 1) therefore has the same shapes at every step and one graph serves
 *   them all.
 * - A prompt is right-padded to a power-of-two bucket (at least MIN_BUCKET), so prompts of
 *   lengths in one bucket share a prefill graph; padding sits at positions after the real
 *   tokens, so no real token attends to it, and the logits are those of each row's last real token.
 * - Left-padded batch rows are placed without their padding (row b's tokens at 0..n_b - 1).
 * - The cache capacity is a power of two too (prompt bucket + new tokens), so generations of
 *   similar lengths reuse the same decode graph.
 * - Greedy steps (prefillGreedy/decodeGreedy) take the argmax inside the step, so the picked ids
 *   [B, 1] int64 stay on the device and feed the next step directly (see generation/utils.ts).
 * - The KV buffers are kept with the model and reused by the next generation of the same batch
 *   size, capacity and cache dtype (transformers keeps its StaticCache the same way): no
 *   allocation and no first-touch page faults per generation. A step reads only positions it has
 *   written in its own generation, so stale contents are never seen; a generation holds its
 *   buffers until it ends, so concurrent generations never share them.
 */
import { compile } from "../../compile/index.js";
import { argmax } from "../../tensor/ops.js";
import { Module } from "../../nn/module.js";
import { fromBytes } from "../../tensor/creation.js";
import type { DType } from "../../tensor/dtype.js";
import { encode } from "../../tensor/host.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { PreTrainedModel } from "../modeling_utils.js";
import { StaticKVCache } from "../static_kv_cache.js";

/** The smallest prompt bucket (shorter prompts are padded up to it). */
export const MIN_BUCKET = 8;

/** The graph-ready step: logits [B, 1, vocab] of the rows chosen by `logitRows`. */
export type StaticStepFn = (ids: Tensor, positions: Tensor, slots: Tensor, rows: Tensor, tables: Tensor, logitRows: Tensor, ...buffers: Tensor[]) => Tensor;

/** How a step runs: as written ("eager") or through a compiler (torch.compile). */
export type StepWrapper = (step: StaticStep) => StaticStepFn;

/** Runs the steps op by op. */
export const eagerSteps: StepWrapper = (step) => step.forward;

/**
 * Compiles the steps (torch.compile of the step module, so replacing a model parameter
 * recompiles): one graph per prompt bucket for prefill, one for decode.
 */
export const compiledSteps: StepWrapper = (step) => compile(step, { name: "generate.step" });

/** The smallest power of two >= max(n, MIN_BUCKET). */
export function promptBucket(n: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(n, MIN_BUCKET)));
}

/**
 * The step of `model` as a module (its one child is the model), storing keys/values rounded to
 * `dtype`: a pure function of its tensors and the model's parameters.
 */
export class StaticStep extends Module {
  /** `greedy`: return the argmax ids [B, 1] int64 of the logits instead of the logits. */
  constructor(readonly model: PreTrainedModel, private readonly dtype: DType, private readonly greedy = false) {
    super();
    this.module("model", model);
  }

  forward: StaticStepFn = (ids, positions, slots, rows, tables, logitRows, ...buffers) => {
    const pools = Array.from({ length: buffers.length / 2 }, (_, i) => ({ keys: buffers[2 * i], values: buffers[2 * i + 1] }));
    const cache = new StaticKVCache(pools, this.dtype);
    cache.bind({ positions, slots, rows, tables });
    const logits = this.model.forward({ inputIds: ids, positionIds: [], attentionMask: null, cache, positions, logitsRows: logitRows });
    return this.greedy ? argmax(logits, -1) : logits;
  };
}

/** One step function per (model, wrapper, cache dtype, greedy), so a compiler's graph cache lives as long as the model. */
const stepFunctions = new WeakMap<PreTrainedModel, Map<StepWrapper, Map<string, StaticStepFn>>>();

function cachedStep(model: PreTrainedModel, wrap: StepWrapper, dtype: DType, greedy: boolean): StaticStepFn {
  let byWrap = stepFunctions.get(model);
  if (!byWrap) stepFunctions.set(model, (byWrap = new Map()));
  let byKey = byWrap.get(wrap);
  if (!byKey) byWrap.set(wrap, (byKey = new Map()));
  const key = `${dtype}:${greedy}`;
  let f = byKey.get(key);
  if (!f) byKey.set(key, (f = wrap(new StaticStep(model, dtype, greedy))));
  return f;
}

/** Idle KV caches of each model, for the next generation of the same shape (see the file comment). */
const idleCaches = new WeakMap<PreTrainedModel, StaticKVCache[]>();

/** An idle cache of `model` for B rows of `capacity` positions of `dtype`, else a new one. */
function takeCache(model: PreTrainedModel, B: number, capacity: number, dtype: DType): StaticKVCache {
  const idle = idleCaches.get(model) ?? [];
  const i = idle.findIndex((c) => c.dtype === dtype && c.capacity === capacity && c.pools[0]?.keys.shape[0] === B && c.pools[0]?.keys.device === model.device);
  if (i >= 0) return idle.splice(i, 1)[0];
  return StaticKVCache.allocate(model.kvHeads(), B, capacity, dtype, model.device);
}

/** A step's positions [B, L] and slots [B * L]: two views of `both`, int32 [2, B * L]. */
interface Places {
  both: Tensor;
  positions: Tensor;
  slots: Tensor;
}

/**
 * The prefill and decode forwards of one generation on a StaticKVCache (a reused one when the
 * model has an idle one of this shape; `release` hands it back). `prompts`: each
 * row's real tokens (no padding); `newTokens`: the most tokens any row will feed back
 * (capacity = bucket of the longest prompt + newTokens, rounded up to a power of two).
 */
export class StaticSteps {
  private readonly cache: StaticKVCache;
  private readonly step: StaticStepFn;
  private readonly greedyStep: StaticStepFn;
  private readonly lengths: number[];
  private readonly tables: Tensor;
  private readonly decodeRows: Tensor;
  /** The KV buffers as the step's trailing arguments (keys and values of each layer). */
  private readonly buffers: Tensor[];
  /**
   * Where the device can overwrite memory in place (cpu: Device.writeSync), the decode steps'
   * positions [B, 1] and slots [B]: two views of one int32 [2, B] tensor rewritten every step, so
   * that no tensor is made per token and the compiled step sees the same arguments each time.
   * (Made per step, they cost the Qwen3-0.6B-shaped int4 decode ~40 us of JavaScript a token, AMD
   * EPYC Zen 5: the step before streams the CPU caches out.) Null elsewhere: a fresh upload each step.
   */
  private readonly decodePlaces: Places | null;

  constructor(private readonly model: PreTrainedModel, private readonly prompts: number[][], newTokens: number, dtype: DType, wrap: StepWrapper) {
    const B = prompts.length;
    this.lengths = prompts.map((r) => r.length);
    const capacity = 2 ** Math.ceil(Math.log2(promptBucket(Math.max(...this.lengths)) + newTokens));
    model.prepareStaticStep(capacity);
    this.cache = takeCache(model, B, capacity, dtype);
    this.step = cachedStep(model, wrap, dtype, false);
    this.greedyStep = cachedStep(model, wrap, dtype, true);
    const rowIds = Array.from({ length: B }, (_, b) => b);
    this.tables = this.int32(rowIds, [B, 1]);
    this.decodeRows = this.int32(rowIds, [B]);
    this.buffers = this.cache.pools.flatMap((p) => [p.keys, p.values]);
    this.decodePlaces = model.device.writeSync ? this.uploadPlaces(prompts.map(() => [0])) : null;
  }

  /** The generation is over: its KV cache may serve the next one (call once, as the last call). */
  release(): void {
    let idle = idleCaches.get(this.model);
    if (!idle) idleCaches.set(this.model, (idle = []));
    // One idle cache per shape is enough for sequential generations; more would only hold memory.
    if (!idle.some((c) => c.dtype === this.cache.dtype && c.capacity === this.cache.capacity && c.pools[0]?.keys.shape[0] === this.cache.pools[0]?.keys.shape[0])) idle.push(this.cache);
  }

  private int32(xs: number[], shape: number[]): Tensor {
    return fromBytes(encode(xs, "int32"), "int32", shape, this.model.device);
  }

  /** Each position of `positions` [B][L], then its cache slot (row * capacity + position): the int32 values of a step's positions and slots. */
  private placeValues(positions: number[][]): number[] {
    const cap = this.cache.capacity;
    return [...positions.flat(), ...positions.flatMap((r, b) => r.map((p) => b * cap + p))];
  }

  /** Positions [B, L] and slots [B * L] of a step, in one upload passed as two views of it. */
  private uploadPlaces(positions: number[][]): Places {
    const B = positions.length, L = positions[0].length;
    const both = this.int32(this.placeValues(positions), [2, B * L]);
    return { both, positions: both.select(0, 0).reshape([B, L]), slots: both.select(0, 1) };
  }

  private run(step: StaticStepFn, ids: Tensor, positions: number[][], rows: Tensor, logitRows: Tensor, places = this.uploadPlaces(positions)): Tensor {
    return step(ids, places.positions, places.slots, rows, this.tables, logitRows, ...this.buffers);
  }

  private runPrefill(step: StaticStepFn): Tensor {
    const B = this.prompts.length, Lb = promptBucket(Math.max(...this.lengths));
    const ids = this.prompts.map((r) => [...r, ...new Array<number>(Lb - r.length).fill(0)]);
    const positions = ids.map((r) => r.map((_, j) => j));
    const rows = this.int32(ids.flatMap((r, b) => r.map(() => b)), [B * Lb]);
    const last = this.int32(this.lengths.map((n, b) => b * Lb + n - 1), [B, 1]);
    return this.run(step, this.model.idsTensor(ids), positions, rows, last);
  }

  private runDecode(step: StaticStepFn, ids: Tensor, index: number): Tensor {
    const positions = this.lengths.map((n) => [n + index]), places = this.decodePlaces;
    if (places) places.both.device.writeSync!(places.both.storage, places.both.byteOffset, encode(this.placeValues(positions), "int32"));
    return this.run(step, ids, positions, this.decodeRows, this.tables, places ?? undefined);
  }

  /** Prefill the prompts: logits [B, 1, vocab] of each row's last token. */
  prefill(): Tensor {
    return this.runPrefill(this.step);
  }

  /** Decode step `step` (0-based) feeding `next` [B]: logits [B, 1, vocab]. */
  decode(next: number[], step: number): Tensor {
    return this.runDecode(this.step, this.model.idsTensor(next.map((t) => [t])), step);
  }

  /** Prefill the prompts and pick greedily: each row's next id, [B, 1] int64 on the model's device. */
  prefillGreedy(): Tensor {
    return this.runPrefill(this.greedyStep);
  }

  /** Decode step `step` (0-based) feeding `ids` [B, 1] int64 (a previous greedy pick, left on the device): the next ids [B, 1]. */
  decodeGreedy(ids: Tensor, step: number): Tensor {
    return this.runDecode(this.greedyStep, ids, step);
  }
}
