/**
 * The decode GEMVs' split over the thread pool (native thread_pool.h parallel_ranges: one
 * contiguous range per thread, pieces stolen from the back of the others') and the cpu weight
 * arena (devices/cpu/weight_arena.ts) that packs quantized weights into huge-page blocks.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { BLOCK_BYTES } from "../src/devices/cpu/weight_arena.js";
import { Linear } from "../src/nn/layers.js";
import { ModuleList } from "../src/nn/module.js";
import { quantizeLinears } from "../src/nn/quantized.js";
import { fromBytes } from "../src/tensor/creation.js";
import { linearQuantized, quantizeBlocks } from "../src/tensor/ops.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { SHAPES } from "./helpers/decode_split_cases.js";
import { lcgValues } from "./helpers/lcg.js";
import * as T from "../src/index.js";

const run = promisify(execFile);
const CASES = join(fileURLToPath(new URL(".", import.meta.url)), "helpers", "decode_split_cases.js");

test("decode GEMVs (q4/q8 linearQuantized and its group, bf16 linear; M 1-3, N and K with remainders) are bit-identical for 1, 2, 3 and 5 threads", async () => {
  const hashes: Record<string, string>[] = [];
  for (const threads of ["1", "2", "3", "5"]) {
    const { stdout } = await run(process.execPath, [CASES, "run"], { env: { ...process.env, TSORCH_NUM_THREADS: threads } });
    hashes.push(JSON.parse(stdout));
  }
  const names = Object.keys(hashes[0]);
  assert.ok(names.length >= 2 * SHAPES.K.length * SHAPES.N.length * SHAPES.M.length, `${names.length} cases`);
  for (const [i, threads] of [2, 3, 5].entries()) {
    for (const name of names) assert.equal(hashes[i + 1][name], hashes[0][name], `${name}: ${threads} threads differ from 1`);
  }
});

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
async function collectUntil(done: () => boolean): Promise<boolean> {
  for (let i = 0; i < 50 && !done(); i++) {
    gc();
    await new Promise((r) => setTimeout(r, 10));
  }
  return done();
}

const bytesOf = (t: Tensor) => t.storage.handle as Uint8Array;
const weight = (N: number, K: number, seed: number) => fromBytes(new Uint8Array(lcgValues(N * K, seed).buffer), "float32", [N, K], "cpu");

/**
 * Float64 x @ dequantize(q, scales)^T for one row x (the reference the quantized kernels
 * approximate), with each row's bound on the error of quantizing x to int8 per block of 32
 * (element error <= max|x in block| / 254): sum_k |w[n, k]| * that.
 */
async function reference(x: Float32Array, q: Tensor, scales: Tensor, bits: 4 | 8, N: number, K: number): Promise<{ val: number[]; bound: number[] }> {
  const codes = new Uint8Array(((await q.data()) as Int32Array).slice().buffer), s = (await scales.data()) as Float32Array;
  const row = (K * bits) / 8, val: number[] = [], bound: number[] = [];
  for (let n = 0; n < N; n++) {
    let acc = 0, err = 0;
    for (let k = 0; k < K; k++) {
      const j = k & 31, b = n * row + (k >> 5) * (bits === 8 ? 32 : 16);
      const c = bits === 8 ? (codes[b + j] << 24) >> 24 : (j < 16 ? codes[b + j] & 15 : codes[b + j - 16] >> 4) - 8;
      const w = c * s[n * (K / 32) + (k >> 5)];
      acc += x[k] * w;
      err += Math.abs(w) * Math.max(...Array.from(x.subarray(k & ~31, (k & ~31) + 32), Math.abs)) / 254;
    }
    val.push(acc);
    bound.push(err * 1.001 + 1e-5);
  }
  return { val, bound };
}

test("weight arena: quantized weights share 2 MB-aligned huge-page blocks, 64-byte aligned, and compute as the reference", async () => {
  const dev = T.getDevice("cpu"), arena = dev.weightArena!();
  const N = 77, K = 1056, x = lcgValues(K, 5);
  for (const bits of [4, 8] as const) {
    const a = quantizeBlocks(weight(N, K, 1), bits, arena), b = quantizeBlocks(weight(N, K, 2), bits, arena);
    for (const t of [a.q, a.scales, b.q, b.scales]) {
      assert.equal(bytesOf(t).buffer.byteLength, BLOCK_BYTES, "a view of an arena block");
      assert.equal(bytesOf(t).byteOffset % 64, 0, "64-byte aligned");
    }
    assert.equal(bytesOf(a.q).buffer, bytesOf(b.scales).buffer, "one block");
    const y = (await linearQuantized(fromBytes(new Uint8Array(x.slice().buffer), "float32", [1, K], "cpu"), b.q, b.scales, bits).data()) as Float32Array;
    const ref = await reference(x, b.q, b.scales, bits, N, K);
    for (let n = 0; n < N; n++) assert.ok(Math.abs(y[n] - ref.val[n]) <= ref.bound[n], `q${bits} row ${n}: ${y[n]} vs ${ref.val[n]} (bound ${ref.bound[n]})`);
  }
  const big = arena.allocate(3 * 1024 * 1024).handle as Uint8Array;
  assert.equal(big.byteLength, big.buffer.byteLength, "a request from 2 MB on gets its own buffer");
});

test("weight arena lifetimes: a tensor survives its siblings' release, and one model's arena is freed while another's is in use", async () => {
  const dev = T.getDevice("cpu"), K = 1024;
  const mk = () => new ModuleList([new Linear(K, 512, false), new Linear(K, 256, false)]);
  const models = [mk(), mk()];
  models.forEach((m, i) => m.items.forEach((l, j) => l.weight.set(weight(l.outFeatures, K, 10 * i + j))));
  models.forEach((m) => quantizeLinears(m, "int4"));
  const [a, b] = models.map((m) => m.items.map((l) => l.quantized!));
  assert.equal(bytesOf(a[0].q).buffer, bytesOf(a[1].scales).buffer, "a model's weights share a block");
  assert.notEqual(bytesOf(a[0].q).buffer, bytesOf(b[0].q).buffer, "each model has its own arena");
  const x = fromBytes(new Uint8Array(lcgValues(K, 3).buffer), "float32", [1, K], "cpu");
  const before = (await models[1].items[1].forward(x).data() as Float32Array).slice();
  // Release and drop b's first weight (its memory is not handed out again), and collect all of
  // model a: b's second weight keeps its block and its bytes.
  dev.release!(b[0].q.storage);
  dev.release!(b[0].scales.storage);
  for (let i = 0; i < 4; i++) (dev.allocate(bytesOf(b[0].q).byteLength).handle as Uint8Array).fill(0xff);
  models[1].items[0].quantized = null;
  b.shift();
  let freed = false;
  const registry = new FinalizationRegistry(() => (freed = true));
  registry.register(bytesOf(a[0].q).buffer, "a");
  models[0] = mk();
  a.length = 0;
  assert.ok(await collectUntil(() => freed), "model a's arena block is collected once its weights are unreachable");
  const after = (await models[1].items[1].forward(x).data()) as Float32Array;
  assert.deepEqual(after, before, "model b computes as before");
});
