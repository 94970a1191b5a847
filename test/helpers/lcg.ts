/** Deterministic pseudo-random float32 values in [-1, 1): a 32-bit linear congruential generator (Numerical Recipes' constants) from `seed`. */
export function lcgValues(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}
