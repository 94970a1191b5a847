/**
 * The generation loop (transformers' GenerationMixin.generate, greedy search and multinomial
 * sampling): prefill the prompt into a KV cache, then decode one token per step, applying the
 * logits processors, until every sequence hit an EOS id or a stop string, or its token budget
 * (see newTokenBudget). Batches are left-padded with an attention mask; finished rows continue
 * with the pad id. Each row's finish reason is recorded as it ends. With `compile`, prefill and
 * decode run as graph-ready steps on a static KV cache instead (static_steps.ts).
 */
import { argmax } from "../../tensor/ops.js";
import { tidy } from "../../tensor/scope.js";
import type { DType } from "../../tensor/dtype.js";
import type { Tensor } from "../../tensor/tensor.js";
import { KVCache } from "../cache_utils.js";
import { positionsFromMask, type PreTrainedModel } from "../modeling_utils.js";
import {
  newTokenBudget, resolveGenerationConfig,
  type FinishReason, type GenerationConfig, type GenerationOptions, type OptionLabels,
} from "./configuration_utils.js";
import { argmaxRow, repetitionPenalty, samplingWarpers, warp, type LogitsProcessor, type Warper } from "./logits_process.js";
import { Random } from "./rng.js";
import { compiledSteps, eagerSteps, StaticSteps } from "./static_steps.js";
import { StopStringCriteria } from "./stopping_criteria.js";

const warned = new Set<string>();

/**
 * The graph-ready steps of a generation with `compile` set (see GenerationOptions.compile), or
 * null for eager generation: when compile is off, or the model has no static step (said once per reason).
 */
function staticSteps(model: PreTrainedModel, compile: boolean | "eager" | undefined, prompts: number[][], steps: number, dtype: DType): StaticSteps | null {
  if (!compile) return null;
  const why = model.staticStepUnsupported();
  if (why) {
    if (!warned.has(why)) console.warn(`compile: ${why}; generating eagerly`);
    warned.add(why);
    return null;
  }
  return new StaticSteps(model, prompts, steps, dtype, compile === "eager" ? eagerSteps : compiledSteps);
}

/**
 * The steps of one generation: yields, per step, the new token of every row (the pad id for rows
 * that already finished). `finishReasons[b]` is null while row b runs and is set, before the step
 * that ends the row is yielded, to why it ended.
 */
export interface GenerationStream extends AsyncGenerator<number[], void> {
  readonly finishReasons: readonly (FinishReason | null)[];
}

/** The logits processors (on the whole row) and, when sampling, the warpers, in transformers' order. */
function processors(s: GenerationConfig): { procs: LogitsProcessor[]; warpers: Warper[] } {
  return { procs: s.repetitionPenalty !== 1 ? [repetitionPenalty(s.repetitionPenalty)] : [], warpers: s.doSample ? samplingWarpers(s) : [] };
}

/**
 * Generate token by token. `inputIds` [B][L] (rows of equal length; pad on the left and pass
 * attentionMask for prompts of different lengths); `generationConfig` is generation_config.json as
 * stored. Validates everything before returning (unknown option names, bad values, a prompt with
 * no room left, learned positions exceeded), so bad arguments throw at the call. `labels` names the
 * options in messages (the CLI passes its flags).
 */
export function generateStream(model: PreTrainedModel, generationConfig: Record<string, unknown>, inputIds: number[][], o: GenerationOptions = {}, labels: OptionLabels = {}): GenerationStream {
  const s = resolveGenerationConfig(generationConfig, model.config, o, labels);
  const B = inputIds.length;
  if (B === 0) throw new RangeError("generate: no input sequences");
  const L = inputIds[0].length;
  if (L === 0) throw new RangeError("generate: empty prompt (pass at least one token, e.g. the BOS id)");
  if (inputIds.some((r) => r.length !== L)) throw new RangeError("generate: prompts have different lengths; left-pad them and pass attentionMask");
  model.checkIds(inputIds);
  const mask = (o.attentionMask ?? inputIds.map((r) => r.map(() => 1))).map((r) => [...r]);
  if (mask.length !== B || mask.some((r) => r.length !== L)) throw new RangeError("generate: attentionMask must have the shape of inputIds");
  mask.forEach((r, b) => {
    if (r.some((m) => m !== 0 && m !== 1)) throw new RangeError(`generate: attentionMask row ${b} must hold only 0 and 1`);
    const first = r.indexOf(1);
    if (first < 0) throw new RangeError(`generate: attentionMask row ${b} masks every token`);
    if (r.indexOf(0, first) >= 0) throw new RangeError(`generate: attentionMask row ${b} is not left-padded (a 0 follows a 1); pad prompts on the left`);
  });
  const steps = newTokenBudget(s, L, { maxPositions: model.maxPositions, positionLimit: model.positionLimit, name: model.constructor.name });
  const finishReasons = new Array<FinishReason | null>(B).fill(null);
  return Object.assign(decode(model, s, inputIds, mask, steps, o, finishReasons), { finishReasons });
}

async function* decode(model: PreTrainedModel, s: GenerationConfig, inputIds: number[][], mask: number[][], steps: number,
  o: GenerationOptions, reasons: (FinishReason | null)[]): AsyncGenerator<number[], void> {
  const L = inputIds[0].length;
  const { procs, warpers } = processors(s);
  const rng = new Random(o.seed);
  const stops = s.stopStrings.length ? new StopStringCriteria(o.tokenizer!, s.stopStrings) : undefined;
  const dtype = o.cacheDtype ?? model.dtype;
  // The cache holds the prompt and every new token but the last (which is never fed back).
  const newCache = () => new KVCache(model.numLayers, s.cacheImplementation, L + steps - 1, dtype);
  const recomputeAt = model.cacheRecomputeLength();
  const seqs = inputIds.map((r) => [...r]);
  const padding = mask.map((r) => r.indexOf(1));
  const seen = mask.map((r) => r.reduce((a, m) => a + (m ? 1 : 0), 0));
  const statics = staticSteps(model, o.compile ?? model.compileGeneration, inputIds.map((r, b) => r.slice(padding[b])), steps, dtype);
  // The static steps hold a reused KV cache: hand it back however the stream ends. A dynamic cache's
  // buffers go back to the device's pool the same way (KVCache.release), for the next generate.
  let cache: KVCache | null = null;
  try {
    cache = statics ? null : newCache();
    /** Step `step`'s tokens from its picks (the pad id for rows already finished), appended to the sequences; sets finish reasons. */
    const accept = (picked: number[], step: number): number[] => {
      const next = picked.map((t, b) => (reasons[b] ? s.pad : t));
      next.forEach((t, b) => {
        seqs[b].push(t);
        if (reasons[b]) return;
        if (s.eos.includes(t)) reasons[b] = "eos";
        else if (stops?.matches(seqs[b], padding[b])) reasons[b] = "stop_string";
        else if (step === steps - 1) reasons[b] = "length";
      });
      return next;
    };

    if (statics && procs.length === 0 && !s.doSample) {
      // Greedy on static steps: the argmax runs inside the step and the picked ids stay on the
      // device, feeding the next step directly. Step n + 1 is queued before step n's ids are read,
      // so reading them overlaps the device's work; the one step queued after the last is dropped.
      // A finished row keeps being fed its own picks instead of the pad id: rows are independent,
      // and its output is the pad id either way.
      // A read still pending when the caller stops iterating is never awaited: mark it handled.
      const read = (t: Tensor) => {
        const p = t.data();
        p.catch(() => undefined);
        return p;
      };
      let ids = statics.prefillGreedy();
      let pending = read(ids);
      for (let step = 0; step < steps; step++) {
        const ahead = step < steps - 1 ? statics.decodeGreedy(ids, step) : null;
        const next = accept(Array.from(await pending, Number), step);
        yield next;
        if (reasons.every(Boolean) || !ahead) break;
        ids = ahead;
        pending = read(ids);
      }
      return;
    }

    // A step's forward runs in one scope, so its temporaries go back to the device's buffer pool
    // instead of being allocated afresh (and page-faulted in) every step. Greedy decoding reads only
    // each step's argmax, which runs in the same scope (the logits, B x V floats, go back too):
    // `logits` then holds the ids.
    const greedy = procs.length === 0 && !s.doSample;
    const run = (forward: () => Tensor): Tensor => tidy(() => (greedy ? argmax(forward(), -1) : forward()));
    const prefill = (ids: number[][]) => run(() => model.forward({
      inputIds: model.idsTensor(ids), positionIds: positionsFromMask(mask, 0), attentionMask: mask, cache, logitsToKeep: 1,
    }));
    let logits = statics ? statics.prefill() : prefill(inputIds);

    for (let step = 0; step < steps; step++) {
      let picked: number[];
      if (greedy) {
        picked = Array.from(await logits.data(), Number);
      } else {
        const V = logits.shape[2];
        const all = (await logits.data()) as Float32Array;
        picked = seqs.map((seq, b) => {
          const row = all.subarray(b * V, (b + 1) * V);  // data() is a copy of the logits: rows are edited in place
          for (const p of procs) p(row, seq);
          return s.doSample ? rng.sample(row, warp(row, warpers)) : argmaxRow(row);
        });
      }
      const next = accept(picked, step);
      yield next;
      if (reasons.every(Boolean)) break;
      if (statics) {
        logits = statics.decode(next, step);
        continue;
      }
      for (const r of mask) r.push(1);
      if (cache!.seqLength === recomputeAt) {
        // transformers' Phi3ForCausalLM.prepare_inputs_for_generation: past the original context,
        // LongRoPE switches frequencies, so the cache is recomputed once from the whole sequence.
        cache!.release();
        cache = newCache();
        logits = prefill(seqs);
        continue;
      }
      logits = run(() => model.forward({
        inputIds: model.idsTensor(next.map((t) => [t])),
        positionIds: seen.map((n) => [n + step]),
        attentionMask: mask,
        cache,
        logitsToKeep: 1,
      }));
    }
  } finally {
    statics?.release();
    cache?.release();
  }
}

/** generate()'s result with returnDictInGenerate: each row's full sequence and why it ended. */
export interface GenerateOutput {
  sequences: number[][];
  finishReason: FinishReason[];
}

/**
 * Run generateStream to the end; returns each row's full sequence (prompt, then new tokens; rows
 * that finished early are padded with the pad id up to the longest row) and its finish reason.
 */
export async function generate(model: PreTrainedModel, generationConfig: Record<string, unknown>, inputIds: number[][], o: GenerationOptions = {}): Promise<GenerateOutput> {
  const seqs = inputIds.map((r) => [...r]);
  const stream = generateStream(model, generationConfig, inputIds, o);
  for await (const step of stream) step.forEach((t, b) => seqs[b].push(t));
  return { sequences: seqs, finishReason: stream.finishReasons as FinishReason[] };
}
