/**
 * Child process of test/cpu_decode_split.test.ts: runs the decode-sized GEMVs whose work is split
 * over the thread pool (linearQuantized, linearQuantizedGroup, bfloat16 linear at M <= 3) on fixed
 * inputs and prints one JSON object: case name -> sha256 of the output bytes. Run with different
 * TSORCH_NUM_THREADS, the hashes must agree (the split changes which thread computes a row, never
 * its arithmetic).
 */
import { createHash } from "node:crypto";
import { DTYPE_CODE, native } from "../../src/devices/cpu/native.js";
import { lcgValues as values } from "./lcg.js";

const nat = native();

/** quantizeBlocks of values(N * K, seed): codes and scales. */
export function quantized(bits: 4 | 8, N: number, K: number, seed: number): { q: Uint8Array; s: Float32Array } {
  const q = new Uint8Array((N * K * bits) / 8), s = new Float32Array((N * K) / 32);
  nat.quantizeBlocks(values(N * K, seed), DTYPE_CODE.float32, bits, q, s, N, K);
  return { q, s };
}

const hash = (a: Float32Array) => createHash("sha256").update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest("hex");

/** Shapes with remainders: N around and off the 24-row chunks, K with 1-3 tail blocks of 32. */
export const SHAPES = { M: [1, 2, 3], N: [1, 23, 25, 1000, 3077], K: [32, 96, 1056] };
export const GROUP_N = [[1000, 77, 3001], [3072, 3072], [2048, 1024, 1024]];

function main(): void {
  const out: Record<string, string> = {};
  for (const bits of [4, 8] as const) {
    for (const K of SHAPES.K) for (const N of SHAPES.N) {
      const { q, s } = quantized(bits, N, K, N + K + bits);
      for (const M of SHAPES.M) {
        const y = new Float32Array(M * N);
        nat.linearQuantized(values(M * K, M), q, s, bits, null, 0, y, M, N, K);
        out[`q${bits} M=${M} N=${N} K=${K}`] = hash(y);
      }
    }
    for (const Ns of GROUP_N) for (const M of SHAPES.M) {
      const K = 1056, args: (Uint8Array | Float32Array | number | null)[] = [], ys: Float32Array[] = [];
      for (let j = 0; j < 3; j++) {
        const N = Ns[j];
        if (!N) { args.push(null, null, null, 0, null, 0); continue; }
        const { q, s } = quantized(bits, N, K, j + 7), y = new Float32Array(M * N);
        ys.push(y);
        args.push(q, s, values(N, j), DTYPE_CODE.float32, y, N);
      }
      nat.linearQuantizedGroup(values(M * K, M), bits, M, K, ...args);
      out[`group q${bits} M=${M} N=${Ns}`] = ys.map(hash).join(",");
    }
  }
  for (const K of [100, 1056]) for (const N of [1000, 3077]) for (const M of SHAPES.M) {
    const v = new Uint32Array(values(N * K, K).buffer), w = new Uint16Array(N * K);
    for (let i = 0; i < w.length; i++) w[i] = v[i] >>> 16;
    const y = new Float32Array(M * N);
    nat.linear(values(M * K, M), w, DTYPE_CODE.bfloat16, null, 0, y, M, N, K);
    out[`bf16 M=${M} N=${N} K=${K}`] = hash(y);
  }
  console.log(JSON.stringify(out));
}

if (process.argv[2] === "run") main();
