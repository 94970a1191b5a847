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

/** TemperatureLogitsWarper: scores / temperature, divided in float32 as torch divides a float32
 * tensor by a Python float (the temperature rounded to float32 first). */
export function temperatureWarper(temperature: number): LogitsProcessor {
  if (!(temperature > 0)) throw new RangeError(`temperature must be a strictly positive number, got ${temperature}`);
  const t = Math.fround(temperature);
  return (scores) => {
    for (let i = 0; i < scores.length; i++) scores[i] /= t;
  };
}

/**
 * The m largest scores above -Infinity (NaN excluded), in descending order (fewer when fewer
 * qualify). A bounded min-heap over one pass (O(n log m), nearly all elements rejected by one
 * comparison with the heap's least) for m small against the row; otherwise a sort of the
 * qualifying scores. A vocabulary-sized row (151,936 scores) took 17-22 ms per full sort.
 */
function largest(scores: Float32Array, m: number): Float32Array {
  if (m * 8 >= scores.length) {
    const finite = new Float32Array(scores.length);
    let n = 0;
    for (let i = 0; i < scores.length; i++) if (scores[i] > -Infinity) finite[n++] = scores[i];
    return finite.subarray(0, n).sort().reverse().subarray(0, m);
  }
  const heap = new Float32Array(m);
  let size = 0;
  for (let i = 0; i < scores.length; i++) {
    const s = scores[i];
    if (!(s > -Infinity) || (size === m && s <= heap[0])) continue;
    let at: number;
    if (size < m) {
      at = size++;
      while (at > 0 && heap[(at - 1) >> 1] > s) {  // sift up
        const parent = (at - 1) >> 1;
        heap[at] = heap[parent];
        at = parent;
      }
    } else {
      at = 0;
      for (;;) {  // sift down from the root, which s replaces
        const l = 2 * at + 1;
        if (l >= m) break;
        const c = l + 1 < m && heap[l + 1] < heap[l] ? l + 1 : l;
        if (heap[c] >= s) break;
        heap[at] = heap[c];
        at = c;
      }
    }
    heap[at] = s;
  }
  return heap.subarray(0, size).sort().reverse();
}

/** TopKLogitsWarper: keep scores >= the k-th largest (ties at the boundary are kept; a NaN counts
 * as the largest, as in an ascending sort). */
export function topKWarper(topK: number): LogitsProcessor {
  if (!Number.isInteger(topK) || topK <= 0) throw new RangeError(`topK must be a positive integer, got ${topK}`);
  return (scores) => {
    const k = Math.min(topK, scores.length);
    let nans = 0;
    for (let i = 0; i < scores.length; i++) if (scores[i] !== scores[i]) nans++;
    if (nans >= k) return;  // the k-th largest is a NaN: nothing compares below it
    const top = largest(scores, k - nans);
    const kth = top.length === k - nans ? top[k - nans - 1] : -Infinity;
    for (let i = 0; i < scores.length; i++) if (scores[i] < kth) scores[i] = -Infinity;
  };
}

/** TopPLogitsWarper: keep the smallest set of top tokens whose probability mass exceeds topP
 * (scanning ascending, drop tokens while the cumulative mass is <= 1 - topP); at least one kept.
 * Tokens tied with the smallest kept score are all kept. Equivalently, from the top: a token is
 * dropped once the tokens above it hold mass >= topP. So no sort of the row (17-22 ms for 151,936
 * scores): the top 64 scores (`largest`) usually settle it; otherwise a weighted quickselect
 * (massCutoff) finds the cutoff in O(vocab). */
export function topPWarper(topP: number): LogitsProcessor {
  if (!(topP >= 0 && topP <= 1)) throw new RangeError(`topP must be in [0, 1], got ${topP}`);
  return (scores) => {
    let max = -Infinity, n = 0;
    for (let i = 0; i < scores.length; i++) {
      const s = scores[i];
      if (s > -Infinity) { n++; if (s > max) max = s; }
    }
    if (n === 0) return;
    let z = 0;
    for (let i = 0; i < scores.length; i++) if (scores[i] > -Infinity) z += Math.exp(scores[i] - max);
    const target = topP * z;  // masses below are unnormalized, as z
    const top = largest(scores, Math.min(64, n));
    let cutoff = max, above = 0, r = 0;
    for (; r < top.length && (r === 0 || above < target); r++) above += Math.exp((cutoff = top[r]) - max);
    if (r === top.length && top.length < n && target > 0) {
      const vals = new Float32Array(n), w = new Float64Array(n);
      for (let i = 0, j = 0; i < scores.length; i++) if (scores[i] > -Infinity) w[j] = Math.exp((vals[j++] = scores[i]) - max);
      cutoff = massCutoff(vals, w, target);
    }
    for (let i = 0; i < scores.length; i++) if (scores[i] < cutoff) scores[i] = -Infinity;
  };
}

/**
 * The largest of vals whose entries at or above it weigh >= target (w[i] the weight of vals[i];
 * target > 0), or the least of vals when none does: three-way partitions around a pivot, keeping
 * the side that holds the answer (vals and w are reordered).
 */
function massCutoff(vals: Float32Array, w: Float64Array, target: number): number {
  let lo = 0, hi = vals.length, above = 0;  // entries outside [lo, hi) above them weigh `above` (< target)
  for (;;) {
    const pivot = vals[(lo + hi) >> 1];
    // [lo, gt): > pivot; [gt, eq): == pivot; [lt, hi): < pivot.
    let gt = lo, eq = lo, lt = hi, mg = 0, me = 0;
    while (eq < lt) {
      const v = vals[eq], x = w[eq];
      if (v > pivot) {
        mg += x;
        vals[eq] = vals[gt], w[eq] = w[gt], vals[gt] = v, w[gt] = x;
        gt++, eq++;
      } else if (v < pivot) {
        lt--;
        vals[eq] = vals[lt], w[eq] = w[lt], vals[lt] = v, w[lt] = x;
      } else {
        me += x;
        eq++;
      }
    }
    if (above + mg >= target) hi = gt;  // the answer is above the pivot (that side weighs > 0)
    else if (above + mg + me >= target || lt === hi) return pivot;
    else above += mg + me, lo = lt;
  }
}

/** MinPLogitsWarper: drop tokens whose probability is below minP times the top probability, i.e.
 * whose score is below max + ln(minP) (no softmax needed); a row holding a NaN is left as is. */
export function minPWarper(minP: number): LogitsProcessor {
  if (!(minP >= 0 && minP <= 1)) throw new RangeError(`minP must be in [0, 1], got ${minP}`);
  return (scores) => {
    let max = -Infinity;
    for (let i = 0; i < scores.length; i++) {
      const s = scores[i];
      if (s !== s) return;
      if (s > max) max = s;
    }
    const threshold = max + Math.log(minP);
    for (let i = 0; i < scores.length; i++) if (scores[i] < threshold) scores[i] = -Infinity;
  };
}
