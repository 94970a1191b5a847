/**
 * A seedable random number generator for sampling (xoshiro128**, seeded through splitmix32).
 * The same seed gives the same tokens on every run and device; it cannot reproduce PyTorch's
 * generator, so sampled text differs from transformers' for the same seed. Without a seed, the
 * state comes from crypto.getRandomValues (never the clock: two generators made in the same
 * millisecond differ).
 */
export class Random {
  private s = new Uint32Array(4);
  private weights = new Float64Array(0);  // sample's scratch
  constructor(seed?: number) {
    if (seed === undefined) {
      do crypto.getRandomValues(this.s); while (this.s.every((w) => w === 0)); // xoshiro's state must not be all zero
      return;
    }
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.s[i] = (z ^ (z >>> 16)) >>> 0;
    }
  }

  /** Uniform in [0, 1). */
  next(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result / 4294967296;
  }

  /**
   * Draw an index with probability proportional to exp(scores) (torch.multinomial of softmax).
   * `at` (ascending) lists the indices that may hold a finite score, every other being -Infinity
   * (a Warper's result, e.g. top-k's survivors); null: any index. The draw is the same either way.
   */
  sample(scores: Float32Array, at: Int32Array | null = null): number {
    const n = at ? at.length : scores.length;
    let max = -Infinity;
    for (let j = 0; j < n; j++) {
      const s = scores[at ? at[j] : j];
      if (s > max) max = s;
    }
    // exp(s - max) once per score, kept for the draw (exp(-Infinity) is 0: skipped).
    if (this.weights.length < n) this.weights = new Float64Array(n);
    const w = this.weights;
    let sum = 0;
    for (let j = 0; j < n; j++) {
      const s = scores[at ? at[j] : j];
      sum += w[j] = s === -Infinity ? 0 : Math.exp(s - max);
    }
    let u = this.next() * sum;
    let last = 0;  // every score -Infinity: index 0, as for the whole row
    for (let j = 0; j < n; j++) {
      const i = at ? at[j] : j;
      if (scores[i] === -Infinity) continue;
      last = i;
      u -= w[j];
      if (u < 0) return i;
    }
    return last;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
