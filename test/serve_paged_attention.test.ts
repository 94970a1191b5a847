/**
 * The paged-attention ops (tensor/paged_attention.ts) against the contiguous attention
 * (scaled_dot_product_attention, itself checked against float64 in the conformance suite): keys and
 * values written through pagedKVWrite to scattered blocks, then a ragged batch of query tokens from
 * several sequences at arbitrary positions, with grouped heads, a sliding window and soft-capping,
 * on cpu and on webgpu.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Device } from "../src/devices/device.js";
import * as T from "../src/index.js";
import { pagedAttention, pagedKVWrite } from "../src/tensor/paged_attention.js";
import { maxAbsDiff } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
}

const randn = (r: () => number, shape: number[]) => T.tensor(Array.from({ length: shape.reduce((a, b) => a * b, 1) }, r), { shape });
const i32 = (xs: number[], shape = [xs.length]) => T.tensor(xs, { dtype: "int32", shape });

/**
 * `run`: each sequence also queries its last `run` positions in order (a prefill chunk);
 * `decode`: the query tokens are only each sequence's last position (a decode step).
 */
interface Case { Hq: number; Hkv: number; D: number; bs: number; lens: number[]; window?: number; softcap?: number; pool?: "bfloat16" | "float16"; run?: number; decode?: boolean }

async function check(device: Device, c: Case, tol: number): Promise<void> {
  const r = rng(c.lens.length * 31 + c.D);
  const S = c.lens.length, N = c.lens.reduce((a, l) => a + Math.ceil(l / c.bs), 0) + 3;
  // Blocks of every sequence, scattered over the pool in a shuffled order.
  const order = Array.from({ length: N }, (_, i) => i).sort((a, b) => ((a * 7919 + 13) % N) - ((b * 7919 + 13) % N));
  let next = 0;
  const tables = c.lens.map((l) => Array.from({ length: Math.ceil(l / c.bs) }, () => order[next++]));
  const width = Math.max(...tables.map((t) => t.length));
  const keys = c.lens.map((l) => randn(r, [l, c.Hkv, c.D])), values = c.lens.map((l) => randn(r, [l, c.Hkv, c.D]));
  const pool = c.pool ?? "float32";
  const kPool = T.full([N, c.bs, c.Hkv, c.D], 0, { dtype: pool }).to(device), vPool = T.full([N, c.bs, c.Hkv, c.D], 0, { dtype: pool }).to(device);
  // The reference attends to the keys/values as the pools hold them (rounded to their dtype).
  const held = (x: T.Tensor) => x.to(pool).to("float32");
  c.lens.forEach((l, s) => {
    const slots = Array.from({ length: l }, (_, p) => tables[s][Math.floor(p / c.bs)] * c.bs + (p % c.bs));
    pagedKVWrite(keys[s].to(device), values[s].to(device), kPool, vPool, i32(slots).to(device));
  });
  // Query tokens: every sequence's last position, plus a few earlier ones, interleaved.
  const tokens: [number, number][] = [];
  if (c.decode) c.lens.forEach((l, s) => tokens.push([s, l - 1]));
  else c.lens.forEach((l, s) => tokens.push([s, l - 1], [s, Math.floor(l / 2)], [s, 0]));
  tokens.reverse();
  c.lens.forEach((l, s) => { for (let p = Math.max(0, l - (c.run ?? 0)); p < l; p++) tokens.push([s, p]); });
  const q = randn(r, [tokens.length, c.Hq, c.D]);
  const flat = tables.flatMap((t) => [...t, ...new Array<number>(width - t.length).fill(0)]);
  const out = pagedAttention(q.to(device), kPool, vPool, i32(flat, [S, width]).to(device), i32(tokens.map((t) => t[0])).to(device), i32(tokens.map((t) => t[1])).to(device), { window: c.window, softcap: c.softcap });
  const got = Array.from((await out.data()) as Float32Array);
  const want: number[] = [];
  for (const [i, [s, p]] of tokens.entries()) {
    const lo = c.window ? Math.max(0, p + 1 - c.window) : 0;
    const k = held(keys[s]).narrow(0, lo, p + 1 - lo).transpose(0, 1).unsqueeze(0), v = held(values[s]).narrow(0, lo, p + 1 - lo).transpose(0, 1).unsqueeze(0);
    const ref = T.scaledDotProductAttention(q.narrow(0, i, 1).transpose(0, 1).unsqueeze(0), k, v, { softcap: c.softcap });
    want.push(...((await ref.data()) as Float32Array));
  }
  assert.ok(maxAbsDiff(got, want) < tol, `max |paged - contiguous| = ${maxAbsDiff(got, want)}`);
}

const CASES: [string, Case][] = [
  ["grouped heads 4/2, block size 4, ragged lengths, prefill runs", { Hq: 4, Hkv: 2, D: 8, bs: 4, lens: [1, 5, 13, 16], run: 11 }],
  ["one head per kv head, block size 16, a long sequence", { Hq: 2, Hkv: 2, D: 16, bs: 16, lens: [70, 3] }],
  ["sliding window 5 and soft-capping", { Hq: 6, Hkv: 3, D: 8, bs: 4, lens: [11, 9], window: 5, softcap: 2 }],
  ["bfloat16 pools (a bfloat16 model's KV cache), grouped heads", { Hq: 4, Hkv: 2, D: 16, bs: 4, lens: [3, 18], pool: "bfloat16" }],
  ["float16 pools, sliding window", { Hq: 2, Hkv: 1, D: 8, bs: 8, lens: [20, 7], window: 6, pool: "float16" }],
  ["Qwen3-0.6B's heads (16 of 128 over 8 kv heads), bfloat16 pools, 300 positions", { Hq: 16, Hkv: 8, D: 128, bs: 16, lens: [300, 37], pool: "bfloat16", run: 20 }],
  ["one kv head over 700 positions (keys split over threads), head size 20 (vector tail)", { Hq: 4, Hkv: 1, D: 20, bs: 16, lens: [700] }],
  ["keys split over threads with a sliding window of 600, soft-capping and a prefill run", { Hq: 2, Hkv: 1, D: 32, bs: 16, lens: [900], window: 600, softcap: 3, run: 12 }],
  // Decode steps: pieces of several kv heads (paged_attention.cc's nh > 1), split over the keys for long contexts.
  ["decode step of Qwen3-0.6B's heads, batch 1, bfloat16 pools, 96 positions", { Hq: 16, Hkv: 8, D: 128, bs: 16, lens: [96], pool: "bfloat16", decode: true }],
  ["decode step of Qwen3-0.6B's heads, batch 3, 2100 positions (keys split)", { Hq: 16, Hkv: 8, D: 128, bs: 16, lens: [40, 2100, 5], decode: true }],
  ["decode step, one block per sequence (the static cache's kernel), bfloat16 pools, 1500 positions", { Hq: 16, Hkv: 8, D: 128, bs: 2048, lens: [1500], pool: "bfloat16", decode: true }],
  ["decode step, groups of 3 query heads, sliding window 700 and soft-capping, bfloat16 pools", { Hq: 12, Hkv: 4, D: 64, bs: 16, lens: [1200, 9], window: 700, softcap: 5, pool: "bfloat16", decode: true }],
  ["decode step, one query head per kv head, head size 40 (vector tail), one block per sequence", { Hq: 4, Hkv: 4, D: 40, bs: 64, lens: [33, 64], decode: true }],
  ["decode step, float16 pools (per-head pieces), one block per sequence", { Hq: 16, Hkv: 8, D: 128, bs: 128, lens: [100], pool: "float16", decode: true }],
];

for (const [name, c] of CASES) {
  test(`paged attention equals contiguous attention on cpu: ${name}`, async () => {
    await check(T.getDevice("cpu"), c, 1e-5);
  });
  if (c.pool) continue; // the WGSL kernels read float32 pools (serve keeps float32 pools on webgpu)
  test(`paged attention equals contiguous attention on webgpu: ${name}`, async (t) => {
    const dev = await webgpuOrSkip(t);
    if (dev) await check(dev, c, 1e-4);
  });
}

test("paged ops reject bad shapes, dtypes and slots with one-line errors", () => {
  const pool = T.full([2, 4, 1, 8], 0), pool2 = T.full([2, 4, 1, 8], 0);
  assert.throws(() => pagedKVWrite(T.full([3, 1, 8], 0), T.full([3, 1, 8], 0), pool, pool2, i32([0, 1])), /k \[3,1,8\] \/ v \[3,1,8\] must be \[2, 1, 8\]/);
  assert.throws(() => pagedKVWrite(T.full([1, 1, 8], 0), T.full([1, 1, 8], 0), pool, pool2, i32([8])), /slot 8 of token 0 is outside the pool's 8 slots/);
  assert.throws(() => pagedAttention(T.full([1, 2, 8], 0), pool, pool2, i32([0], [1, 1]), T.tensor([0]), i32([0])), /tokenSeq must be a 1-D int32 tensor/);
  assert.throws(() => pagedAttention(T.full([1, 2, 8], 0), pool, pool2, i32([5], [1, 1]), i32([0]), i32([0])), /names block 5, outside the pool's 2 blocks/);
});

test("pagedKVWrite rounds to a bfloat16 pool exactly as a cast does (ties to even, NaN, infinities)", async () => {
  const r = rng(7);
  const special = [Number.NaN, Infinity, -Infinity, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -0, 3.4e38, 1e-40];
  const vals = Array.from({ length: 3 * 2 * 40 }, (_, i) => special[i] ?? r() * 100);
  const k = T.tensor(vals, { shape: [3, 2, 40] }), v = T.tensor(vals.map((x) => -x), { shape: [3, 2, 40] });
  const kPool = T.full([2, 4, 2, 40], 0, { dtype: "bfloat16" }), vPool = T.full([2, 4, 2, 40], 0, { dtype: "bfloat16" });
  pagedKVWrite(k, v, kPool, vPool, i32([6, 1, 3]));
  for (const [t, slot] of [6, 1, 3].entries()) {
    assert.deepEqual(await kPool.reshape(8, 2, 40).select(0, slot).data(), await k.select(0, t).to("bfloat16").data());
    assert.deepEqual(await vPool.reshape(8, 2, 40).select(0, slot).data(), await v.select(0, t).to("bfloat16").data());
  }
});
