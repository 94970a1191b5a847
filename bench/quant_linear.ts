/**
 * `node dist/bench/quant_linear.js [--copies N]`: speed of the cpu's block-quantized linear
 * (linearQuantized, q8_0 / q4_0 weights, int8 activations on the integer path the host selects) at
 * Qwen3-0.6B's MLP shapes, M = 1 (decode), 8 and 32 (prefill). Each figure cycles through `copies`
 * (default 24) distinct weights so that, as in a model, W comes from DRAM rather than cache.
 * Prints ms per call (best wall time and least CPU time, bench/timing.ts), GOPS = 2·M·N·K / CPU
 * time and GB/s = bytes of W (codes + float32 scales) / wall time (pass --copies 150 or more so
 * that W comes from DRAM even on hosts with a large L3). TSORCH_NUM_THREADS sets the pool; TSORCH_CPU_INT8 / TSORCH_CPU_ADDON select a path or
 * another build to compare against.
 */
import { parseArgs } from "node:util";
import { DTYPE_CODE, native } from "../src/devices/cpu/native.js";
import { bestMs } from "./timing.js";

const { values } = parseArgs({ options: { copies: { type: "string" } } });
const copies = Number(values.copies ?? 24);
const nat = native();
console.log(`cpu: ${nat.cpuFeatures()}, ${nat.numThreads()} threads, ${copies} weight copies`);

function rand(n: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
  return a;
}

for (const [K, N] of [[1024, 3072], [3072, 1024]]) {
  const w = rand(N * K);
  for (const bits of [8, 4]) {
    const ws = Array.from({ length: copies }, () => {
      const q = new Uint8Array((N * K * bits) / 8), s = new Float32Array(N * K / 32);
      nat.quantizeBlocks(w, DTYPE_CODE.float32, bits, q, s, N, K);
      return { q, s };
    });
    const parts: string[] = [];
    for (const M of [1, 8, 32]) {
      const x = rand(M * K), out = new Float32Array(M * N);
      let i = 0;
      const t = bestMs(() => { const { q, s } = ws[i++ % copies]; nat.linearQuantized(x, q, s, bits, null, 0, out, M, N, K); }, 7, 100);
      const gbs = ((N * K * bits) / 8 + (N * K) / 8) / t.wall / 1e6;  // codes + float32 scales per wall ms
      parts.push(`M=${M} ${t.wall.toFixed(3)} ms (cpu ${t.cpu.toFixed(3)}) ${((2 * M * N * K) / t.cpu / 1e6).toFixed(0)} GOPS ${gbs.toFixed(1)} GB/s`);
    }
    console.log(`q${bits}_0 ${K} -> ${N}: ${parts.join(" | ")}`);
  }
}
