/**
 * conv2d throughput on cpu at Stable Diffusion 1.5 shapes (512x512 images: 64x64 latents in the
 * UNet, the VAE decoder's first levels), float32 activations with float32 and bfloat16 weights.
 * With --peer-python PATH (a Python with torch, e.g. /tmp/reference-venv/bin/python) PyTorch runs
 * the same shapes in the same run (bench/conv2d_peer.py, float32, as many threads as tsorch's pool)
 * and the ratio tsorch / PyTorch is printed. Each figure is the best of several timed windows.
 *
 * Run: `npx tsc -p . && node dist/bench/conv2d.js [--peer-python PATH]` (TSORCH_NUM_THREADS sets
 * the pool's size).
 */
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { native } from "../src/devices/cpu/native.js";
import * as torch from "../src/index.js";
import { bestMs as bestMsOver, type Ms } from "./timing.js";

/** [N, C, H, W, O, kernel, stride, padding] and what it is in SD 1.5. */
const SHAPES: [string, number[]][] = [
  ["unet conv_in 4->320 @64x64", [1, 4, 64, 64, 320, 3, 1, 1]],
  ["resnet 320->320 @64x64", [1, 320, 64, 64, 320, 3, 1, 1]],
  ["downsample 320 @64x64 stride 2", [1, 320, 64, 64, 320, 3, 2, 1]],
  ["resnet 640->640 @32x32", [1, 640, 32, 32, 640, 3, 1, 1]],
  ["resnet 1280->1280 @16x16", [1, 1280, 16, 16, 1280, 3, 1, 1]],
  ["resnet 1280->1280 @8x8", [1, 1280, 8, 8, 1280, 3, 1, 1]],
  ["proj_in 1x1 320->320 @64x64", [1, 320, 64, 64, 320, 1, 1, 0]],
  ["shortcut 1x1 640->320 @64x64", [1, 640, 64, 64, 320, 1, 1, 0]],
  ["vae decoder 512->512 @64x64", [1, 512, 64, 64, 512, 3, 1, 1]],
];

const { values } = parseArgs({ options: { "peer-python": { type: "string" } } });

function rand(n: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
  return a;
}

const bestMs = (fn: () => void) => bestMsOver(fn, 5, 150);

const threads = native().numThreads();
console.log(`cpu: ${native().cpuFeatures()}, ${threads} threads`);
const rows: { name: string; gflop: number; f32: Ms; bf16: Ms }[] = [];
for (const [name, [N, C, H, W, O, k, stride, padding]] of SHAPES) {
  const x = torch.tensor(rand(N * C * H * W), { shape: [N, C, H, W] });
  const w = torch.tensor(rand(O * C * k * k), { shape: [O, C, k, k] }), b = torch.tensor(rand(O));
  const wb = w.to("bfloat16");
  const Ho = Math.floor((H + 2 * padding - k) / stride) + 1, Wo = Math.floor((W + 2 * padding - k) / stride) + 1;
  const gflop = (2 * N * O * Ho * Wo * C * k * k) / 1e9;
  const f32 = bestMs(() => torch.conv2d(x, w, b, { stride, padding }));
  const bf16 = bestMs(() => torch.conv2d(x, wb, b, { stride, padding }));
  rows.push({ name, gflop, f32, bf16 });
}
let peer: Ms[] | null = null;
if (values["peer-python"]) {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../bench/conv2d_peer.py");
  const spec = JSON.stringify({ threads, shapes: SHAPES.map(([, s]) => s) });
  peer = JSON.parse(execFileSync(values["peer-python"], [script, spec], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })) as Ms[];
}
const g = (gflop: number, ms: number) => (gflop / ms * 1e3).toFixed(1).padStart(6);
console.log("GFLOPS by wall time (GFLOP per CPU-second, all threads, in brackets); PyTorch float32; ratio = tsorch float32 / PyTorch float32 (by wall, by CPU time)");
console.log(`${"shape".padEnd(32)}${"GFLOP".padStart(6)}  ${"tsorch f32".padEnd(15)} ${"tsorch bf16 w".padEnd(15)}${peer ? ` ${"PyTorch f32".padEnd(15)} ratio` : ""}`);
const cell = (gflop: number, ms: Ms) => `${g(gflop, ms.wall)} (${g(gflop, ms.cpu).trim()})`.padEnd(15);
rows.forEach((r, i) => {
  const p = peer ? ` ${cell(r.gflop, peer[i])} ${(peer[i].wall / r.f32.wall).toFixed(2)}x (${(peer[i].cpu / r.f32.cpu).toFixed(2)}x)` : "";
  console.log(`${r.name.padEnd(32)}${r.gflop.toFixed(2).padStart(6)}  ${cell(r.gflop, r.f32)} ${cell(r.gflop, r.bf16)}${p}`);
});
