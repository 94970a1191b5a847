/**
 * Logits processors and warpers, applied on the host to one row of next-token scores
 * (Float32Array [vocab]) in transformers' order: repetition penalty, then, when sampling,
 * temperature, top-k, top-p, min-p. Each mirrors the class of the same name in transformers'
 * generation/logits_process.py (removed tokens get -Infinity).
 *
 * The warpers come in two forms: LogitsProcessor (transformers' form: the whole row, in place) and
 * Warper (warpTopK, ...), which also takes and returns the indices that may still hold a finite
 * score. After top-k that is about k indices of a 151,936-token row, so the warpers after it and
 * Random.sample read only those (each pass over the whole row costs ~0.1-0.3 ms in a decode step);
 * the values are the same.
 */

import { largest, massCutoff } from "./selection.js";

export type LogitsProcessor = (scores: Float32Array, ids: readonly number[]) => void;

/**
 * A warper over the scores at the indices `at` (ascending; null: every index), every other score
 * being -Infinity already; sets the scores it removes to -Infinity and returns the indices that
 * may still be finite (`at` itself, or fewer: top-k's survivors).
 */
export type Warper = (scores: Float32Array, at: Int32Array | null) => Int32Array | null;

/** A Warper in LogitsProcessor form (the whole row). */
const wholeRow = (w: Warper): LogitsProcessor => (scores) => { w(scores, null); };

/** RepetitionPenaltyLogitsProcessor: every id already in the sequence (prompt included) gets
 * score * penalty when negative, score / penalty otherwise. */
export function repetitionPenalty(penalty: number): LogitsProcessor {
  if (!(penalty > 0)) throw new RangeError(`repetitionPenalty must be a positive number, got ${penalty}`);
  return (scores, ids) => {
    for (const id of new Set(ids)) {
      const s = scores[id];
      scores[id] = s < 0 ? s * penalty : s / penalty;
    }
  };
}

/** TemperatureLogitsWarper: scores / temperature, divided in float32 as torch divides a float32
 * tensor by a Python float (the temperature rounded to float32 first). */
export function warpTemperature(t: number): Warper {
  if (!(t > 0)) throw new RangeError(`temperature must be a strictly positive number, got ${t}`);
  const t32 = Math.fround(t);
  return (scores, at) => {
    const n = at ? at.length : scores.length;
    for (let j = 0; j < n; j++) scores[at ? at[j] : j] /= t32;  // -Infinity elsewhere stays -Infinity
    return at;
  };
}

/** TopKLogitsWarper: keep scores >= the k-th largest (ties at the boundary are kept; a NaN counts
 * as the largest, as in an ascending sort). Returns the indices kept. */
export function warpTopK(k: number): Warper {
  if (!Number.isInteger(k) || k <= 0) throw new RangeError(`topK must be a positive integer, got ${k}`);
  return (scores, at) => {
    const n = at ? at.length : scores.length, kk = Math.min(k, scores.length);
    let nans = 0;
    for (let j = 0; j < n; j++) {
      const s = scores[at ? at[j] : j];
      if (s !== s) nans++;
    }
    if (nans >= kk) return at;  // the k-th largest is a NaN: nothing compares below it
    const top = largest(scores, at, kk - nans);
    const kth = top.length === kk - nans ? top[kk - nans - 1] : -Infinity;
    const kept: number[] = [];
    for (let j = 0; j < n; j++) {
      const i = at ? at[j] : j;
      if (scores[i] < kth) scores[i] = -Infinity;
      else kept.push(i);
    }
    return Int32Array.from(kept);
  };
}

/** TopPLogitsWarper: keep the smallest set of top tokens whose probability mass reaches topP
 * (scanning ascending, drop tokens while the cumulative mass is <= 1 - topP); at least one kept.
 * A row holding a NaN or +Infinity is left as is (transformers' softmax is NaN there, and it drops nothing).
 * Tokens tied with the smallest kept score are all kept. Equivalently, from the top: a token is
 * dropped once the tokens above it hold mass >= topP. So no sort of the row (17-22 ms for 151,936
 * scores): the top 64 scores (`largest`) usually settle it; otherwise a weighted quickselect
 * (massCutoff) finds the cutoff in O(vocab). */
export function warpTopP(p: number): Warper {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`topP must be in [0, 1], got ${p}`);
  return (scores, at) => {
    const n = at ? at.length : scores.length;
    let max = -Infinity, finite = 0;
    for (let j = 0; j < n; j++) {
      const s = scores[at ? at[j] : j];
      if (s !== s || s === Infinity) return at;
      if (s > -Infinity) { finite++; if (s > max) max = s; }
    }
    if (finite === 0) return at;
    let z = 0;
    for (let j = 0; j < n; j++) {
      const s = scores[at ? at[j] : j];
      if (s > -Infinity) z += Math.exp(s - max);
    }
    const target = p * z;  // masses below are unnormalized, as z
    const top = largest(scores, at, Math.min(64, finite));
    let cutoff = max, above = 0, r = 0;
    for (; r < top.length && (r === 0 || above < target); r++) above += Math.exp((cutoff = top[r]) - max);
    if (r === top.length && top.length < finite && target > 0) {
      const vals = new Float32Array(finite), w = new Float64Array(finite);
      for (let j = 0, f = 0; j < n; j++) {
        const s = scores[at ? at[j] : j];
        if (s > -Infinity) w[f] = Math.exp((vals[f++] = s) - max);
      }
      cutoff = massCutoff(vals, w, target);
    }
    for (let j = 0; j < n; j++) {
      const i = at ? at[j] : j;
      if (scores[i] < cutoff) scores[i] = -Infinity;
    }
    return at;
  };
}

/** MinPLogitsWarper: drop tokens whose probability is below minP times the top probability, i.e.
 * whose score is below max + ln(minP) (no softmax needed); a row holding a NaN or +Infinity is left
 * as is (transformers' softmax is NaN there, and it drops nothing). */
export function warpMinP(p: number): Warper {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`minP must be in [0, 1], got ${p}`);
  return (scores, at) => {
    const n = at ? at.length : scores.length;
    let max = -Infinity;
    for (let j = 0; j < n; j++) {
      const s = scores[at ? at[j] : j];
      if (s !== s || s === Infinity) return at;
      if (s > max) max = s;
    }
    const threshold = max + Math.log(p);
    for (let j = 0; j < n; j++) {
      const i = at ? at[j] : j;
      if (scores[i] < threshold) scores[i] = -Infinity;
    }
    return at;
  };
}

/** The warpers as LogitsProcessors (transformers' form: the whole row, in place). */
export const temperatureWarper = (t: number): LogitsProcessor => wholeRow(warpTemperature(t));
export const topKWarper = (k: number): LogitsProcessor => wholeRow(warpTopK(k));
export const topPWarper = (p: number): LogitsProcessor => wholeRow(warpTopP(p));
export const minPWarper = (p: number): LogitsProcessor => wholeRow(warpMinP(p));

/** Index of the first NaN of `row`, else of its first maximum: the tensor argmax's rule (greedy
 * decoding with logits processors picks what greedy decoding without them would). */
export function argmaxRow(row: Float32Array): number {
  let best = 0;
  for (let i = 0; i < row.length; i++) {
    if (row[i] !== row[i]) return i;
    if (row[i] > row[best]) best = i;
  }
  return best;
}

/** Sampling settings, as generation config and the serving API name them (topK 0, topP 1, minP 0: off). */
export interface SamplingWarpers {
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
  readonly minP: number;
}

/** The warpers of a sampling configuration in transformers' order (temperature, top-k, top-p, min-p), those that change anything. */
export function samplingWarpers(o: SamplingWarpers): Warper[] {
  const warpers: Warper[] = [];
  if (o.temperature !== 1) warpers.push(warpTemperature(o.temperature));
  if (o.topK > 0) warpers.push(warpTopK(o.topK));
  if (o.topP < 1) warpers.push(warpTopP(o.topP));
  if (o.minP > 0) warpers.push(warpMinP(o.minP));
  return warpers;
}

/** Apply `warpers` in order to `scores`; returns the indices that may still hold a finite score (null: any). */
export function warp(scores: Float32Array, warpers: readonly Warper[]): Int32Array | null {
  let at: Int32Array | null = null;
  for (const w of warpers) at = w(scores, at);
  return at;
}
