/**
 * The generation loop (transformers' GenerationMixin.generate, greedy search and multinomial
 * sampling): prefill the prompt into a KV cache, then decode one token per step, applying the
 * logits processors, until every sequence hit an EOS id or a stop string, or maxNewTokens.
 * Batches are left-padded with an attention mask; finished rows continue with the pad id.
 */
import { argmax } from "../../tensor/ops.js";
import { KVCache, type CacheImplementation } from "../cache_utils.js";
import { positionsFromMask, type PreTrainedModel } from "../modeling_utils.js";
import { minPWarper, repetitionPenalty, temperatureWarper, topKWarper, topPWarper, type LogitsProcessor } from "./logits_process.js";
import { Random } from "./rng.js";

/** generate() options; unset fields fall back to generation_config.json, then transformers' defaults. */
export interface GenerationOptions {
  maxNewTokens?: number;
  doSample?: boolean;
  temperature?: number;
  /** Default 50 when sampling, as transformers' GenerationConfig. */
  topK?: number;
  topP?: number;
  minP?: number;
  repetitionPenalty?: number;
  eosTokenId?: number | number[];
  padTokenId?: number;
  /** Stop when the generated text ends inside one of these strings' last characters (needs `tokenizer`). */
  stopStrings?: string[];
  tokenizer?: { decode(ids: number[], opts?: { skipSpecialTokens?: boolean }): string };
  /** Seed of the sampling RNG (default: time-based). */
  seed?: number;
  cacheImplementation?: CacheImplementation;
  /** What the KV cache stores keys and values as: default the model's dtype (`model.dtype`: bfloat16
   * for a bfloat16 checkpoint, as transformers); "float32" keeps full precision at twice the memory. */
  cacheDtype?: "float32" | "float16" | "bfloat16";
  /** 1 = token, 0 = padding, for a left-padded batch [B][L]. */
  attentionMask?: number[][];
}

type Settings = Required<Pick<GenerationOptions, "maxNewTokens" | "doSample" | "temperature" | "topK" | "topP" | "minP" | "repetitionPenalty">> & {
  eos: number[]; pad: number; stopStrings: string[];
};

function settings(model: PreTrainedModel, gen: Record<string, unknown>, o: GenerationOptions): Settings {
  const pick = <T>(mine: T | undefined, key: string, fallback: T): T => mine ?? ((gen[key] ?? fallback) as T);
  const toList = (v: unknown): number[] => (v === undefined || v === null ? [] : Array.isArray(v) ? v : [v as number]);
  const eos = toList(o.eosTokenId ?? gen.eos_token_id ?? model.config.eos_token_id);
  const pad = o.padTokenId ?? (gen.pad_token_id as number | undefined) ?? (model.config.pad_token_id as number | undefined) ?? eos[0] ?? 0;
  const s: Settings = {
    maxNewTokens: pick(o.maxNewTokens, "max_new_tokens", 20),
    doSample: pick(o.doSample, "do_sample", false),
    temperature: pick(o.temperature, "temperature", 1),
    topK: pick(o.topK, "top_k", 50),
    topP: pick(o.topP, "top_p", 1),
    minP: pick(o.minP, "min_p", 0) ?? 0,
    repetitionPenalty: pick(o.repetitionPenalty, "repetition_penalty", 1),
    eos, pad, stopStrings: o.stopStrings ?? [],
  };
  if (!Number.isInteger(s.maxNewTokens) || s.maxNewTokens < 0) throw new RangeError(`maxNewTokens must be a non-negative integer, got ${s.maxNewTokens}`);
  if (!Number.isInteger(s.topK) || s.topK < 0) throw new RangeError(`topK must be a non-negative integer (0 = off), got ${s.topK}`);
  if (!(s.topP > 0 && s.topP <= 1)) throw new RangeError(`topP must be in (0, 1], got ${s.topP}`);
  if (!(s.minP >= 0 && s.minP <= 1)) throw new RangeError(`minP must be in [0, 1], got ${s.minP}`);
  if (!(s.temperature > 0)) throw new RangeError(`temperature must be a strictly positive number, got ${s.temperature}`);
  if (!(s.repetitionPenalty > 0)) throw new RangeError(`repetitionPenalty must be a positive number, got ${s.repetitionPenalty}`);
  if (s.stopStrings.some((st) => typeof st !== "string" || st === "")) throw new RangeError("stopStrings must be non-empty strings");
  if (s.stopStrings.length && !o.tokenizer) throw new Error("stopStrings needs a tokenizer: pass { tokenizer } to generate");
  return s;
}

function processors(s: Settings): LogitsProcessor[] {
  const list: LogitsProcessor[] = [];
  if (s.repetitionPenalty !== 1) list.push(repetitionPenalty(s.repetitionPenalty));
  if (s.doSample) {
    if (s.temperature !== 1) list.push(temperatureWarper(s.temperature));
    if (s.topK > 0) list.push(topKWarper(s.topK));
    if (s.topP < 1) list.push(topPWarper(s.topP));
    if (s.minP > 0) list.push(minPWarper(s.minP));
  }
  return list;
}

/**
 * Generate token by token. `inputIds` [B][L] (rows of equal length; pad on the left and pass
 * attentionMask for prompts of different lengths). Yields, per step, the new token of every row
 * (the pad id for rows that already finished). Throws when the prompt is longer than the model's
 * max_position_embeddings; stops early when the context is full.
 */
export function generateStream(model: PreTrainedModel, generationConfig: Record<string, unknown>, inputIds: number[][], o: GenerationOptions = {}): AsyncGenerator<number[]> {
  // Validate eagerly, so bad arguments throw at the call rather than at the first step.
  const s = settings(model, generationConfig, o);
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
  if (L > model.maxPositions) throw new RangeError(`prompt has ${L} tokens, longer than the model's max_position_embeddings (${model.maxPositions})`);
  return decode(model, s, inputIds, mask, o);
}

async function* decode(model: PreTrainedModel, s: Settings, inputIds: number[][], mask: number[][], o: GenerationOptions): AsyncGenerator<number[]> {
  const B = inputIds.length, L = inputIds[0].length;
  const steps = Math.min(s.maxNewTokens, model.maxPositions - L);
  if (steps === 0) return;

  const procs = processors(s);
  const rng = new Random(o.seed);
  const newCache = () => new KVCache(model.numLayers, o.cacheImplementation ?? "dynamic", L + steps, o.cacheDtype ?? model.dtype);
  let cache = newCache();
  const recomputeAt = model.cacheRecomputeLength();
  const seqs = inputIds.map((r) => [...r]);
  const fresh: number[][] = inputIds.map(() => []);
  const done = new Array<boolean>(B).fill(false);
  const seen = mask.map((r) => r.reduce((a, m) => a + (m ? 1 : 0), 0));

  const prefill = (ids: number[][]) => model.forward({
    inputIds: model.idsTensor(ids), positionIds: positionsFromMask(mask, 0), attentionMask: mask, cache, logitsToKeep: 1,
  });
  let logits = prefill(inputIds);

  for (let step = 0; step < steps; step++) {
    let next: number[];
    if (procs.length === 0 && !s.doSample) {
      next = Array.from(await argmax(logits, -1).data(), Number);
    } else {
      const V = logits.shape[2];
      const all = (await logits.data()) as Float32Array;
      next = seqs.map((seq, b) => {
        const row = all.slice(b * V, (b + 1) * V);
        for (const p of procs) p(row, seq);
        return s.doSample ? rng.sample(row) : argmaxRow(row);
      });
    }
    next = next.map((t, b) => (done[b] ? s.pad : t));
    next.forEach((t, b) => {
      seqs[b].push(t);
      if (done[b]) return;
      fresh[b].push(t);
      if (s.eos.includes(t) || endsInStopString(fresh[b], s.stopStrings, o.tokenizer)) done[b] = true;
    });
    yield next;
    if (done.every(Boolean) || step === steps - 1) break;
    for (const r of mask) r.push(1);
    if (cache.seqLength === recomputeAt) {
      // transformers' Phi3ForCausalLM.prepare_inputs_for_generation: past the original context,
      // LongRoPE switches frequencies, so the cache is recomputed once from the whole sequence.
      cache = newCache();
      logits = prefill(seqs);
      continue;
    }
    logits = model.forward({
      inputIds: model.idsTensor(next.map((t) => [t])),
      positionIds: seen.map((n) => [n + step]),
      attentionMask: mask,
      cache,
      logitsToKeep: 1,
    });
  }
}

function argmaxRow(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** transformers' StopStringCriteria: true when a stop string ends within the last token's text. */
function endsInStopString(ids: number[], stops: string[], tok: GenerationOptions["tokenizer"]): boolean {
  if (!stops.length || !tok) return false;
  const text = tok.decode(ids);
  const before = tok.decode(ids.slice(0, -1)).length;
  return stops.some((st) => {
    const at = text.indexOf(st, Math.max(0, before - st.length + 1));
    return at >= 0 && at + st.length > before;
  });
}

/** Run generateStream to the end; returns each row's full sequence (prompt, then new tokens). */
export async function generate(model: PreTrainedModel, generationConfig: Record<string, unknown>, inputIds: number[][], o: GenerationOptions = {}): Promise<number[][]> {
  const seqs = inputIds.map((r) => [...r]);
  for await (const step of generateStream(model, generationConfig, inputIds, o)) step.forEach((t, b) => seqs[b].push(t));
  return seqs;
}
