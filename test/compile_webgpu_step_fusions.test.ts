/**
 * compile's greedy-step fusions on webgpu against eager:
 * - linear + argmax (compile/passes/linear_argmax.ts, the linearArgmax kernel): the final norm,
 *   the LM head and the argmax in one call, eager's ids for fused shapes, ties (the first
 *   maximum), NaN logits (the first NaN) and the fallback shapes (more than 8 rows, K not a
 *   multiple of 4, a head over the one-workgroup limit); logits read elsewhere keep their kernels;
 * - rotary gather (compile/passes/rotary_gather.ts, rotaryKVWrite's rows): the cos/sin gathers of
 *   per-position tables folded into the rotary + KV write, pools and rotated queries within 1e-4
 *   of eager (int32 and int64 positions), an out-of-range position still throwing embedding's
 *   RangeError, and the fallback
 *   that gathers first when the device allows too few storage bindings;
 * - attention + projection (compile/passes/attention_out.ts, pagedAttentionLinearAdd): paged
 *   attention, o_proj and the residual add in one call within 1e-4 of eager, with GQA, a window,
 *   soft-capping, a bias and several tokens; the fallback shapes (a projection over the
 *   one-workgroup limit, a row not a multiple of 4) and an attention output read elsewhere;
 * - MLP (compile/passes/mlp_out.ts, linearGroupLinearAdd): a gated MLP's norm, gate/up, SiLU(gate)
 *   * up, down projection and residual add in one call within 1e-4 of eager (Gemma's norm offset,
 *   a bias, several rows), the fallback shapes (over the one-workgroup limit, a hidden size not a
 *   multiple of 4) and a hidden state read elsewhere.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as torch from "../src/index.js";
import { rotaryKVStep } from "./helpers/rotary_kv_step.js";
import type { Device } from "../src/devices/device.js";
import { gatherKernels } from "../src/devices/webgpu/kernels/gather.js";
import { FUSED_MAX_MACS } from "../src/devices/webgpu/kernels/linear_argmax.js";
import { pagedAttention } from "../src/tensor/paged_attention.js";
import { maxAbsDiff } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { graphLog } from "./helpers/graph_log.js";
import { checkArgmaxTiesAndNaN } from "./helpers/linear_argmax_checks.js";
import { lcgValues } from "./helpers/lcg.js";

function rand(shape: number[], seed: number, device: Device): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape, device });
}

/** The kernel calls compile logged (TSORCH_LOGS=graph) for the first call of `f`. */
function kernelCalls(f: () => void): number {
  const logged = graphLog(f);
  const m = /: (\d+) kernel calls/.exec(logged);
  assert.ok(m, logged);
  return Number(m[1]);
}

const ids = async (t: torch.Tensor) => Array.from(await t.data(), Number);

test("compile: on webgpu, the final norm, a linear and its argmax run as one linearArgmax with eager's ids", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const head = (x: torch.Tensor, g: torch.Tensor, w: torch.Tensor) => torch.argmax(torch.linear(torch.rmsNorm(x, g, 1e-5), w), -1, true);
  const bare = (x: torch.Tensor, w: torch.Tensor) => torch.argmax(torch.linear(x, w), -1);
  const bigN = Math.floor(FUSED_MAX_MACS / 64) + 4;
  // [rows, N, K]: fused (one workgroup) and fallback shapes (10 rows, K 30, a head over FUSED_MAX_MACS).
  for (const [M, N, K, seed] of [[1, 512, 64, 1], [3, 100, 32, 2], [8, 77, 16, 3], [10, 40, 32, 4], [2, 40, 30, 5], [1, bigN, 64, 6]] as const) {
    torch.compiler.reset();
    const f = torch.compile(head), fb = torch.compile(bare);
    const gain: torch.Tensor = rand([K], seed + 10, dev), weight: torch.Tensor = rand([N, K], seed + 11, dev);
    assert.equal(kernelCalls(() => f(rand([M, K], seed, dev), gain, weight)), 1, `${M}x${N}x${K}: one call`);
    assert.equal(kernelCalls(() => fb(rand([M, K], seed, dev), weight)), 1, `${M}x${N}x${K} without a norm: one call`);
    for (const s of [seed + 20, seed + 30]) {
      const input = rand([M, K], s, dev);
      assert.deepEqual(await ids(f(input, gain, weight) as torch.Tensor), await ids(head(input, gain, weight)), `${M}x${N}x${K}, input ${s}`);
      assert.deepEqual(await ids(fb(input, weight) as torch.Tensor), await ids(bare(input, weight)), `${M}x${N}x${K} without a norm, input ${s}`);
    }
  }
  // Ties (columns 5, 37, 70 of 96), NaN rows 50 and 80.
  await checkArgmaxTiesAndNaN(dev, 96, [5, 37, 70], [50, 80], kernelCalls);
});

test("compile: on webgpu, the rotary cos/sin gathers by position fold into rotaryKVWrite, within 1e-4 of eager", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const [Hq, Hk, D, R, P] = [4, 2, 8, 8, 32];
  const step = (q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor, cosT: torch.Tensor, sinT: torch.Tensor,
    slots: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor) =>
    rotaryKVStep(Hk, D, true, false)(q, k, v, torch.embedding(positions, cosT), torch.embedding(positions, sinT), slots, kc, vc);
  const [cosT, sinT] = [rand([P, R], 7, dev), rand([P, R], 8, dev)];
  let posDtype: "int32" | "int64" = "int32";
  const args = (L: number, seed: number, pos: number[]) => [rand([1, L, Hq, D], seed, dev), rand([1, L, Hk, D], seed + 1, dev), rand([L, Hk, D], seed + 2, dev),
    torch.tensor(posDtype === "int64" ? pos.map(BigInt) : Int32Array.from(pos), { shape: [1, L], dtype: posDtype, device: dev }), cosT, sinT,
    torch.tensor(Int32Array.from(pos, (p) => p % 16), { shape: [L], dtype: "int32", device: dev })] as const;
  const pools = () => [torch.zeros([2, 8, Hk, D], { device: dev }), torch.zeros([2, 8, Hk, D], { device: dev })] as const;
  const check = async (f: typeof step, L: number, seed: number, pos: number[], what: string) => {
    const [mine, theirs] = [pools(), pools()];
    const got = [...(f(...args(L, seed, pos), ...mine) as torch.Tensor[]), ...mine];
    const want = [...step(...args(L, seed, pos), ...theirs), ...theirs];
    for (const [i, g] of got.entries()) {
      const d = maxAbsDiff(Array.from(await g.data(), Number), Array.from(await want[i].data(), Number));
      assert.ok(d <= 1e-4, `${what}[${i}]: max |compiled - eager| = ${d}`);
    }
  };
  for (const [L, pos, dtype] of [[1, [9], "int32"], [3, [30, 2, 17], "int32"], [2, [4, 31], "int64"]] as const) {
    posDtype = dtype;
    torch.compiler.reset();
    const f = torch.compile(step);
    assert.equal(kernelCalls(() => f(...args(L, 1, [...pos]), ...pools())), 1, `L ${L}: one call (no gathers)`);
    await check(f, L, 2, [...pos], `L ${L}`);
    await check(f, L, 3, pos.map((p) => (p + 5) % P), `L ${L}, new positions`);
    // A position outside the tables: embedding's RangeError at the next read.
    const bad = f(...args(L, 4, [...pos.slice(1), P + 3]), ...pools()) as torch.Tensor[];
    await assert.rejects(bad[0].data(), RangeError, `L ${L}: position ${P + 3} of ${P}`);
  }
  posDtype = "int32";
  // Fallback: a device with fewer storage bindings than the fused kernel needs gathers first.
  const gpu = (dev as unknown as { gpu: GPUDevice }).gpu;
  const limits = gpu.limits, own = Object.getOwnPropertyDescriptor(gpu, "limits");
  const fewer = new Proxy(limits, { get: (o, k) => (k === "maxStorageBuffersPerShaderStage" ? 10 : (o as unknown as Record<string | symbol, unknown>)[k]) });
  Object.defineProperty(gpu, "limits", { value: fewer, configurable: true });
  const embedding = gatherKernels.embedding;
  let gathers = 0;
  gatherKernels.embedding = (...a) => {
    gathers++;
    embedding(...a);
  };
  try {
    assert.equal(gpu.limits.maxStorageBuffersPerShaderStage, 10);
    torch.compiler.reset();
    const f = torch.compile(step);
    f(...args(3, 5, [4, 5, 6]), ...pools());
    await check(f, 3, 6, [7, 30, 1], "gathered first");
    assert.equal(gathers, 2, "the graph's rotaryKVWrite gathered cos and sin itself");
  } finally {
    gatherKernels.embedding = embedding;
    if (own) Object.defineProperty(gpu, "limits", own);
    else delete (gpu as unknown as { limits?: unknown }).limits;
  }
  assert.notEqual(gpu.limits.maxStorageBuffersPerShaderStage, 10);
});

test("compile: on webgpu, paged attention, the output projection and the residual add run as one pagedAttentionLinearAdd, within 1e-4 of eager", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const int32 = (xs: number[], shape: number[]) => torch.tensor(Int32Array.from(xs), { shape, dtype: "int32", device: dev });
  // [query heads, kv heads, head size, output features, tokens, window, softcap, bias, kernel calls]
  const bigN = Math.floor(FUSED_MAX_MACS / 32) + 8;
  for (const [Hq, Hkv, D, N, T, window, softcap, withBias, calls] of [
    [8, 8, 8, 64, 1, 0, 0, false, 1], [4, 2, 8, 24, 3, 0, 0, true, 1], [4, 1, 16, 40, 2, 3, 5, false, 1],
    [2, 2, 3, 10, 2, 0, 0, false, 1], [4, 2, 8, bigN, 1, 0, 0, false, 1],
  ] as const) {
    const bs = 4, blocks = 6, S = 2;
    const layer = (q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, tables: torch.Tensor, seq: torch.Tensor, pos: torch.Tensor,
      w: torch.Tensor, bias: torch.Tensor | null, residual: torch.Tensor) => {
      const att = pagedAttention(q, kc, vc, tables, seq, pos, { window, softcap });
      return torch.linear(att.reshape([T, Hq * D]), w, bias).add(residual);
    };
    const args = (seed: number) => [rand([T, Hq, D], seed, dev), rand([blocks, bs, Hkv, D], seed + 1, dev), rand([blocks, bs, Hkv, D], seed + 2, dev),
      int32([5, 0, 3, 1, 2, 4], [S, 3]), int32(Array.from({ length: T }, (_, i) => i % S), [T]), int32(Array.from({ length: T }, (_, i) => (seed + 3 * i) % 12), [T]),
      rand([N, Hq * D], seed + 3, dev), withBias ? rand([N], seed + 4, dev) : null, rand([T, N], seed + 5, dev)] as const;
    torch.compiler.reset();
    const f = torch.compile(layer);
    const what = `Hq ${Hq}, Hkv ${Hkv}, D ${D}, N ${N}, T ${T}, window ${window}, softcap ${softcap}, bias ${withBias}`;
    assert.equal(kernelCalls(() => f(...args(1))), calls, `${what}: kernel calls`);
    for (const seed of [2, 7]) {
      const got = f(...args(seed)) as torch.Tensor, want = layer(...args(seed));
      assert.deepEqual(got.shape, want.shape);
      const d = maxAbsDiff(Array.from(await got.data(), Number), Array.from(await want.data(), Number));
      assert.ok(d <= 1e-4, `${what}, input ${seed}: max |compiled - eager| = ${d}`);
    }
  }
  // The attention output also returned: attention and the projection stay two kernels.
  const both = (q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, tables: torch.Tensor, seq: torch.Tensor, pos: torch.Tensor, w: torch.Tensor, r: torch.Tensor) => {
    const att = pagedAttention(q, kc, vc, tables, seq, pos);
    return [att, torch.linear(att.reshape([1, 16]), w).add(r)];
  };
  torch.compiler.reset();
  const fb = torch.compile(both);
  const a = [rand([1, 2, 8], 1, dev), rand([2, 4, 2, 8], 2, dev), rand([2, 4, 2, 8], 3, dev), int32([1, 0], [1, 2]), int32([0], [1]), int32([5], [1]), rand([8, 16], 4, dev), rand([1, 8], 5, dev)] as const;
  assert.equal(kernelCalls(() => fb(...a)), 2, "attention output returned: attention + linearAdd");
  const [got, want] = [fb(...a) as torch.Tensor[], both(...a)];
  for (const [i, g] of got.entries()) assert.ok(maxAbsDiff(Array.from(await g.data(), Number), Array.from(await want[i].data(), Number)) <= 1e-4, `output ${i}`);
});

test("compile: on webgpu, a gated MLP with its down projection and residual add runs as one linearGroupLinearAdd, within 1e-4 of eager", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const mlp = (offset: number) => (x: torch.Tensor, g: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor, bias: torch.Tensor | null) => {
    const h = torch.rmsNorm(x, g, 1e-5, offset);
    return torch.linear(torch.silu(torch.linear(h, gate)).mul(torch.linear(h, up)), down, bias).add(x);
  };
  const bigI = Math.floor(FUSED_MAX_MACS / 96) + 4;
  // [rows, K (model dim), I (hidden), norm offset, bias]: fused, then fallbacks (I over the limit, I 30).
  for (const [M, K, I, offset, withBias, seed] of [[1, 64, 172, 0, false, 1], [3, 32, 48, 1, true, 2], [9, 16, 24, 0, false, 3], [1, 32, bigI, 0, false, 4], [2, 32, 30, 0, false, 5]] as const) {
    torch.compiler.reset();
    const f = torch.compile(mlp(offset));
    const args = (s: number) => [rand([M, K], s, dev), rand([K], seed + 10, dev), rand([I, K], seed + 11, dev), rand([I, K], seed + 12, dev),
      rand([K, I], seed + 13, dev), withBias ? rand([K], seed + 14, dev) : null] as const;
    const what = `${M} rows, K ${K}, I ${I}, offset ${offset}, bias ${withBias}`;
    assert.equal(kernelCalls(() => f(...args(seed))), 1, `${what}: one call`);
    for (const s of [seed + 20, seed + 30]) {
      const got = f(...args(s)) as torch.Tensor, want = mlp(offset)(...args(s));
      const d = maxAbsDiff(Array.from(await got.data(), Number), Array.from(await want.data(), Number));
      assert.ok(d <= 1e-4, `${what}, input ${s}: max |compiled - eager| = ${d}`);
    }
  }
  // The hidden state also returned: the group and the down projection stay two kernels.
  const both = (x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) => {
    const h = torch.silu(torch.linear(x, gate)).mul(torch.linear(x, up));
    return [h, torch.linear(h, down).add(x)];
  };
  torch.compiler.reset();
  const fb = torch.compile(both);
  const a = [rand([2, 16], 1, dev), rand([24, 16], 2, dev), rand([24, 16], 3, dev), rand([16, 24], 4, dev)] as const;
  assert.equal(kernelCalls(() => fb(...a)), 2, "hidden state returned: group + linearAdd");
  const [got, want] = [fb(...a) as torch.Tensor[], both(...a)];
  for (const [i, g] of got.entries()) assert.ok(maxAbsDiff(Array.from(await g.data(), Number), Array.from(await want[i].data(), Number)) <= 1e-4, `output ${i}`);
});
