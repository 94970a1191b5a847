/**
 * Logits processors and warpers, applied on the host to one row of next-token scores
 * (Float32Array [vocab]) in transformers' order: repetition penalty, then, when sampling,
 * temperature, top-k, top-p, min-p. Each mirrors the class of the same name in transformers'
 * generation/logits_process.py (removed tokens get -Infinity).
 */

export type LogitsProcessor = (scores: Float32Array, ids: readonly number[]) => void;

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

/** TemperatureLogitsWarper: scores / temperature. */
export function temperatureWarper(temperature: number): LogitsProcessor {
  if (!(temperature > 0)) throw new RangeError(`temperature must be a strictly positive number, got ${temperature}`);
  return (scores) => {
    for (let i = 0; i < scores.length; i++) scores[i] /= temperature;
  };
}

/** TopKLogitsWarper: keep scores >= the k-th largest (ties at the boundary are kept). */
export function topKWarper(topK: number): LogitsProcessor {
  if (!Number.isInteger(topK) || topK <= 0) throw new RangeError(`topK must be a positive integer, got ${topK}`);
  return (scores) => {
    const k = Math.min(topK, scores.length);
    const kth = Float32Array.from(scores).sort().at(-k)!;
    for (let i = 0; i < scores.length; i++) if (scores[i] < kth) scores[i] = -Infinity;
  };
}

function softmaxOf(scores: Float32Array): Float64Array {
  let max = -Infinity;
  for (const s of scores) if (s > max) max = s;
  const p = new Float64Array(scores.length);
  let sum = 0;
  for (let i = 0; i < scores.length; i++) sum += p[i] = Math.exp(scores[i] - max);
  for (let i = 0; i < p.length; i++) p[i] /= sum;
  return p;
}

/** TopPLogitsWarper: keep the smallest set of top tokens whose probability mass exceeds topP
 * (scanning ascending, drop tokens while the cumulative mass is <= 1 - topP); at least one kept.
 * Tokens tied with the smallest kept score are all kept. */
export function topPWarper(topP: number): LogitsProcessor {
  if (!(topP >= 0 && topP <= 1)) throw new RangeError(`topP must be in [0, 1], got ${topP}`);
  return (scores) => {
    const finite = new Float32Array(scores.length);
    let n = 0;
    for (const s of scores) if (s > -Infinity) finite[n++] = s;
    if (n === 0) return;
    const sorted = finite.subarray(0, n).sort(); // ascending, native numeric sort
    const max = sorted[n - 1];
    let z = 0;
    for (let r = 0; r < n; r++) z += Math.exp(sorted[r] - max);
    let cum = 0, cutoff = max;
    for (let r = 0; r < n - 1; r++) {
      cum += Math.exp(sorted[r] - max) / z;
      if (cum > 1 - topP) {
        cutoff = sorted[r];
        break;
      }
    }
    for (let i = 0; i < scores.length; i++) if (scores[i] < cutoff) scores[i] = -Infinity;
  };
}

/** MinPLogitsWarper: drop tokens whose probability is below minP times the top probability. */
export function minPWarper(minP: number): LogitsProcessor {
  if (!(minP >= 0 && minP <= 1)) throw new RangeError(`minP must be in [0, 1], got ${minP}`);
  return (scores) => {
    const p = softmaxOf(scores);
    let top = 0;
    for (const x of p) if (x > top) top = x;
    for (let i = 0; i < p.length; i++) if (p[i] < minP * top) scores[i] = -Infinity;
  };
}
