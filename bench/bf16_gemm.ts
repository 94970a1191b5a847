/**
 * linear with bfloat16 weights at the Qwen3-0.6B bench model's shapes (M = 8: batched decode,
 * M = 32: a 32-token prefill; K 1024 -> N 1024 / 2048 / 3072, K 3072 -> N 1024) and at 1024³:
 * GFLOPS from the best wall time and from the least process CPU time (bench/timing.ts), on this
 * host's bf16 path (`bf16=` in cpuFeatures()) and, in a child process, on the float32 path
 * (TSORCH_CPU_BF16=f32); with --peer-python PATH, PyTorch's bfloat16 F.linear at the same shapes
 * and threads in the same run (bench/bf16_gemm_peer.py).
 *
 * Run: `npx tsc -p . && node dist/bench/bf16_gemm.js [--peer-python PATH]` (TSORCH_NUM_THREADS
 * sets the pool's size).
 */
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { DTYPE_CODE, native } from "../src/devices/cpu/native.js";
import { bestMs, type Ms } from "./timing.js";

/** [M, N, K] */
const SHAPES: [number, number, number][] = [
  [8, 1024, 1024], [8, 2048, 1024], [8, 3072, 1024], [8, 1024, 3072],
  [32, 1024, 1024], [32, 2048, 1024], [32, 3072, 1024], [32, 1024, 3072], [1024, 1024, 1024],
];

const nat = native();
const { values } = parseArgs({ options: { "peer-python": { type: "string" }, child: { type: "boolean" } } });

function rand(n: number): Float32Array {
  return Float32Array.from({ length: n }, () => Math.random() * 2 - 1);
}

/** ms per call of each shape on this process's path. */
function measure(): Ms[] {
  return SHAPES.map(([M, N, K]) => {
    const x = rand(M * K), out = new Float32Array(M * N);
    const w = Uint16Array.from(new Uint32Array(rand(N * K).buffer), (u) => u >>> 16);
    return bestMs(() => nat.linear(x, w, DTYPE_CODE.bfloat16, null, 0, out, M, N, K), 5, 100);
  });
}

if (values.child) {
  console.log(JSON.stringify(measure()));
  process.exit(0);
}
const here = fileURLToPath(import.meta.url);
const mine = measure();
const f32: Ms[] = JSON.parse(execFileSync(process.execPath, [here, "--child"], { env: { ...process.env, TSORCH_CPU_BF16: "f32" }, encoding: "utf8" }).trim().split("\n").at(-1)!);
const threads = nat.numThreads();
const peer: Ms[] | null = values["peer-python"]
  ? JSON.parse(execFileSync(values["peer-python"], [path.join(path.dirname(here), "../../bench/bf16_gemm_peer.py"), String(threads), JSON.stringify(SHAPES)], { encoding: "utf8" }).trim().split("\n").at(-1)!)
  : null;
const path_ = nat.cpuFeatures().match(/bf16=\S+/)![0];
console.log(`cpu: ${nat.cpuFeatures()}, ${threads} threads; GFLOPS from the best wall time / from the least process CPU time ÷ threads (as on idle cores; PyTorch's includes its threads' spinning)`);
const g = (M: number, N: number, K: number, ms: number) => ((2 * M * N * K) / ms / 1e6).toFixed(0);
const cell = (M: number, N: number, K: number, t: Ms) => `${g(M, N, K, t.wall)} / ${g(M, N, K, t.cpu / threads)}`.padEnd(18);
console.log(`${"M x K -> N".padEnd(18)}${path_.padEnd(18)}${"bf16=f32".padEnd(18)}${peer ? "PyTorch bf16" : ""}`);
SHAPES.forEach(([M, N, K], i) => {
  console.log(`${`${M} x ${K} -> ${N}`.padEnd(18)}${cell(M, N, K, mine[i])}${cell(M, N, K, f32[i])}${peer ? cell(M, N, K, peer[i]) : ""}`);
});
