/**
 * `node dist/bench/hub_quant_linear.js [--n N] [--k K] [--threads N]`: median milliseconds of one
 * N x K linear (default 3072 x 1024, a Qwen3-0.6B MLP projection) with a bfloat16 weight, GPTQ int4
 * (group 128), AWQ int4 (group 128) and FP8 e4m3 (blocks 128 x 128), at batch 1 and 32, measured in
 * the same run on random codes through the cpu addon; prints the kernel tier (TSORCH_CPU_ISA picks a
 * lower one).
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { n: { type: "string" }, k: { type: "string" }, threads: { type: "string" } } });
if (values.threads) process.env.TSORCH_NUM_THREADS = values.threads;
const { native } = await import("../src/devices/cpu/native.js");
const nat = native();
const N = Number(values.n ?? 3072), K = Number(values.k ?? 1024), G = Math.ceil(K / 128);
const rnd = (n: number) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
const words = (n: number) => Int32Array.from({ length: n }, () => (Math.random() * 2 ** 32) | 0);
const wbf = Uint16Array.from({ length: N * K }, () => 0x3c00 + ((Math.random() * 256) | 0));
const gptq = words((K / 8) * N), awq = words((K * N) / 8), zeros = words((G * N) / 8);
const scales = Float32Array.from({ length: G * N }, () => Math.random() * 0.01);
const gIdx = Int32Array.from({ length: K }, (_, k) => k >> 7);
const fp8 = Uint8Array.from({ length: N * K }, () => (Math.random() * 256) & 0xf7);  // no NaN codes
const fp8Scales = Float32Array.from({ length: Math.ceil(N / 128) * Math.ceil(K / 128) }, () => Math.random() * 0.01);

/** Median ms of f over 15 timings of 10 calls, after 5 warm-up calls. */
function time(f: () => void): string {
  for (let i = 0; i < 5; i++) f();
  const t: number[] = [];
  for (let r = 0; r < 15; r++) {
    const a = process.hrtime.bigint();
    for (let i = 0; i < 10; i++) f();
    t.push(Number(process.hrtime.bigint() - a) / 1e7);
  }
  return t.sort((a, b) => a - b)[7].toFixed(3);
}

console.log(`host: ${nat.cpuFeatures()}, threads ${nat.numThreads()}, linear ${N} x ${K} (ms, median)`);
console.log("batch  bf16    gptq-int4  awq-int4  fp8");
for (const M of [1, 32]) {
  const x = rnd(M * K), out = new Float32Array(M * N);
  const r = [
    time(() => nat.linear(x, wbf, 2, null, 0, out, M, N, K)),
    time(() => nat.linearPackedInt(x, gptq, zeros, scales, gIdx, 4, 0, 1, null, 0, out, M, N, K, G)),
    time(() => nat.linearPackedInt(x, awq, zeros, scales, gIdx, 4, 1, 0, null, 0, out, M, N, K, G)),
    time(() => nat.linearFp8Block(x, fp8, fp8Scales, 128, 128, null, 0, out, M, N, K)),
  ];
  console.log(`${String(M).padEnd(6)} ${r.map((v) => v.padEnd(9)).join(" ")}`);
}
