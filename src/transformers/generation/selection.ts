/**
 * Selections over a row of scores without sorting it (the sampling warpers of ./logits_process.ts):
 * the m largest scores (a bounded heap) and the weighted cutoff of top-p (a quickselect).
 */

/**
 * The m largest scores above -Infinity (NaN excluded) among the indices `at`, in descending order
 * (fewer when fewer qualify). A bounded min-heap over one pass (O(n log m), nearly all elements
 * rejected by one comparison with the heap's least) for m small against the row; otherwise a sort
 * of the qualifying scores. A vocabulary-sized row (151,936 scores) took 17-22 ms per full sort.
 */
export function largest(scores: Float32Array, at: Int32Array | null, m: number): Float32Array {
  const n = at ? at.length : scores.length;
  if (m * 8 >= n) {
    const finite = new Float32Array(n);
    let count = 0;
    for (let j = 0; j < n; j++) {
      const s = scores[at ? at[j] : j];
      if (s > -Infinity) finite[count++] = s;
    }
    return finite.subarray(0, count).sort().reverse().subarray(0, m);
  }
  const heap = new Float32Array(m);
  let size = 0;
  for (let j = 0; j < n; j++) {
    const s = scores[at ? at[j] : j];
    if (!(s > -Infinity) || (size === m && s <= heap[0])) continue;
    let i: number;
    if (size < m) {
      i = size++;
      while (i > 0 && heap[(i - 1) >> 1] > s) {  // sift up
        const parent = (i - 1) >> 1;
        heap[i] = heap[parent];
        i = parent;
      }
    } else {
      i = 0;
      for (;;) {  // sift down from the root, which s replaces
        const l = 2 * i + 1;
        if (l >= m) break;
        const c = l + 1 < m && heap[l + 1] < heap[l] ? l + 1 : l;
        if (heap[c] >= s) break;
        heap[i] = heap[c];
        i = c;
      }
    }
    heap[i] = s;
  }
  return heap.subarray(0, size).sort().reverse();
}

/**
 * The largest of vals whose entries at or above it weigh >= target (w[i] the weight of vals[i];
 * target > 0), or the least of vals when none does: three-way partitions around a pivot, keeping
 * the side that holds the answer (vals and w are reordered).
 */
export function massCutoff(vals: Float32Array, w: Float64Array, target: number): number {
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
    // One summation order for the tests and the update: `above` stays < target (otherwise rounding
    // could let it reach target with the range empty, and the loop would never end).
    const withAbove = above + mg, withPivot = withAbove + me;
    if (withAbove >= target) hi = gt;  // the answer is above the pivot (that side weighs > 0)
    else if (withPivot >= target || lt === hi) return pivot;
    else above = withPivot, lo = lt;
  }
}
