/**
 * Throughput of the cpu addon's hot kernels: linear (GEMM GFLOPS, GEMV weight bandwidth) and
 * sdpa. Run: `npx tsc -p . && node dist/bench/native_cpu.js` (TSORCH_NUM_THREADS sets the pool).
 * Each figure is the best of several timed windows, so that other load on the machine shows less.
 */
import { DTYPE_CODE, native } from "../src/devices/cpu/native.js";

const nat = native();

function rand(n: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
  return a;
}

/** bfloat16 by truncation (the rounding does not matter for timing). */
function bf16(a: Float32Array): Uint16Array {
  const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
  return Uint16Array.from(u, (x) => x >>> 16);
}

/** Best milliseconds per call over `windows` windows of at least `minMs` each. */
function bestMs(fn: () => void, windows = 7, minMs = 80): number {
  fn();
  fn();
  let best = Infinity;
  for (let w = 0; w < windows; w++) {
    const t0 = performance.now();
    let n = 0, t = 0;
    do {
      fn();
      n++;
      t = performance.now() - t0;
    } while (t < minMs);
    best = Math.min(best, t / n);
  }
  return best;
}

console.log(`cpu: ${nat.cpuFeatures()}, ${nat.numThreads()} threads`);

const linearShapes: [number, number, number][] = [
  [1024, 1024, 1024], // prefill-sized GEMM
  [1, 4096, 1024], // decode GEMV (weights fit in L3 on most machines)
  [1, 14336, 4096], // decode GEMV of an 8B model's MLP (weights from DRAM)
  [8, 4096, 1024],
  [64, 4096, 1024],
];
for (const [M, N, K] of linearShapes) {
  const x = rand(M * K), w = rand(N * K), out = new Float32Array(M * N);
  const parts: string[] = [];
  for (const [name, buf, dtype, bytes] of [["f32", w, DTYPE_CODE.float32, 4], ["bf16", bf16(w), DTYPE_CODE.bfloat16, 2]] as const) {
    const ms = bestMs(() => nat.linear(x, buf, dtype, null, 0, out, M, N, K));
    const gflops = (2 * M * N * K) / ms / 1e6, gbs = (N * K * bytes) / ms / 1e6;
    parts.push(`${name} ${ms.toFixed(3)} ms ${gflops.toFixed(1)} GFLOPS ${gbs.toFixed(1)} GB/s`);
  }
  console.log(`linear M=${M} N=${N} K=${K}: ${parts.join(" | ")}`);
}

const attn: [string, number, number][] = [["decode", 1, 4096], ["prefill", 512, 512]];
for (const [name, Lq, Lk] of attn) {
  const [B, Hq, Hkv, D] = [1, 32, 8, 128];
  const q = rand(B * Hq * Lq * D), k = rand(B * Hkv * Lk * D), v = rand(B * Hkv * Lk * D);
  const out = new Float32Array(B * Lq * Hq * D);
  const st = (H: number, L: number) => [H * L * D, L * D, D, 1];
  const ms = bestMs(() =>
    nat.sdpa(q, st(Hq, Lq), k, st(Hkv, Lk), v, st(Hkv, Lk), out, null, [0, 0, 0], B, Hq, Hkv, Lq, Lk, D, D,
      1 / Math.sqrt(D), 0, Lk - Lq, 0, 0, null));
  const kvBytes = 2 * B * Hkv * Lk * D * 4;
  console.log(`sdpa ${name} Hq=${Hq} Hkv=${Hkv} Lq=${Lq} Lk=${Lk} D=${D} causal: ${ms.toFixed(3)} ms, ` +
    `KV ${(kvBytes / ms / 1e6).toFixed(1)} GB/s`);
}
