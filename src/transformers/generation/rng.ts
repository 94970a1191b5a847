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

  /** Draw an index with probability proportional to exp(scores) (torch.multinomial of softmax). */
  sample(scores: Float32Array): number {
    let max = -Infinity;
    for (let i = 0; i < scores.length; i++) if (scores[i] > max) max = scores[i];
    // exp(s - max) once per score, kept for the draw (a vocabulary-sized row: half the time of two passes).
    if (this.weights.length < scores.length) this.weights = new Float64Array(scores.length);
    const w = this.weights;
    let sum = 0;
    for (let i = 0; i < scores.length; i++) sum += w[i] = scores[i] === -Infinity ? 0 : Math.exp(scores[i] - max);  // exp(-inf) is 0: skipped
    let u = this.next() * sum;
    let last = 0;
    for (let i = 0; i < scores.length; i++) {
      if (scores[i] === -Infinity) continue;
      last = i;
      u -= w[i];
      if (u < 0) return i;
    }
    return last;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
