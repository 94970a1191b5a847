/**
 * Scaled dot-product attention on cpu at Stable Diffusion 1.5 shapes (512x512: self-attention over
 * 4096/1024/256/64 latent positions at head dims 40/80/160/160, cross-attention to 77 text tokens,
 * classifier-free-guidance batch 2, 8 heads) and at decoder-LM shapes (causal, grouped KV heads,
 * prefill and single-token decode), float32. With --peer-python PATH (a Python with torch, e.g.
 * /tmp/reference-venv/bin/python) PyTorch runs the same shapes in the same run (bench/sdpa_peer.py,
 * as many threads as tsorch's pool) and the ratio PyTorch / tsorch is printed (> 1: tsorch faster).
 *
 * Run: `npx tsc -p . && node dist/bench/sdpa.js [--peer-python PATH] [--windows N]`
 * (TSORCH_NUM_THREADS sets the pool's size).
 */
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { native } from "../src/devices/cpu/native.js";
import * as torch from "../src/index.js";
import { bestMs as bestMsOver, type Ms } from "./timing.js";

/** [B, Hq, Hkv, Lq, Lk, D, causal (0/1)] and what it is. */
const SHAPES: [string, number[]][] = [
  ["sd self 64x64 [2,8,4096,40]", [2, 8, 8, 4096, 4096, 40, 0]],
  ["sd self 32x32 [2,8,1024,80]", [2, 8, 8, 1024, 1024, 80, 0]],
  ["sd self 16x16 [2,8,256,160]", [2, 8, 8, 256, 256, 160, 0]],
  ["sd self 8x8 [2,8,64,160]", [2, 8, 8, 64, 64, 160, 0]],
  ["sd cross 4096x77 D=40", [2, 8, 8, 4096, 77, 40, 0]],
  ["sd cross 1024x77 D=80", [2, 8, 8, 1024, 77, 80, 0]],
  ["sd cross 256x77 D=160", [2, 8, 8, 256, 77, 160, 0]],
  ["lm prefill causal 32/8h 512 D=64", [1, 32, 8, 512, 512, 64, 1]],
  ["lm prefill causal 16h 256 D=128", [1, 16, 16, 256, 256, 128, 1]],
  ["lm decode 32/8h 1x2048 D=128", [1, 32, 8, 1, 2048, 128, 1]],
  ["lm chunk causal 32/8h 16x1024 D=64", [1, 32, 8, 16, 1024, 64, 1]],
];

const { values } = parseArgs({ options: { "peer-python": { type: "string" }, windows: { type: "string", default: "3" } } });
const windows = Number(values.windows);

const bestMs = (fn: () => void): Ms => bestMsOver(fn, windows, 100);

function rand(shape: number[]): torch.Tensor {
  const n = shape.reduce((a, b) => a * b, 1), a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
  return torch.tensor(a, { shape });
}

const threads = native().numThreads();
console.log(`cpu: ${native().cpuFeatures()}, ${threads} threads, float32`);
const ours: Ms[] = [];
for (const [, [B, Hq, Hkv, Lq, Lk, D, causal]] of SHAPES) {
  const q = rand([B, Hq, Lq, D]), k = rand([B, Hkv, Lk, D]), v = rand([B, Hkv, Lk, D]);
  ours.push(bestMs(() => torch.scaledDotProductAttention(q, k, v, { isCausal: causal === 1 })));
}
let peer: Ms[] | null = null;
if (values["peer-python"]) {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../bench/sdpa_peer.py");
  const spec = JSON.stringify({ threads, windows, shapes: SHAPES.map(([, s]) => s) });
  peer = JSON.parse(execFileSync(values["peer-python"], [script, spec], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })) as Ms[];
}
const cell = (m: Ms) => `${m.wall.toFixed(2)} (${m.cpu.toFixed(2)})`.padStart(20);
console.log("ms per call by wall time (CPU ms, all threads, in brackets); ratio = PyTorch / tsorch (by wall, by CPU time), > 1: tsorch faster");
console.log(`${"shape".padEnd(36)}${"tsorch".padStart(20)}${peer ? `${"PyTorch".padStart(20)}  ratio` : ""}`);
SHAPES.forEach(([name], i) => {
  const p = peer ? `${cell(peer[i])}  ${(peer[i].wall / ours[i].wall).toFixed(2)}x (${(peer[i].cpu / ours[i].cpu).toFixed(2)}x)` : "";
  console.log(`${name.padEnd(36)}${cell(ours[i])}${p}`);
});
