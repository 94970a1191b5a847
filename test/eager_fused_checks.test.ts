/**
 * Bad input to the eager fused paths: an attention call whose rotary tables or k/v do not fit
 * throws a clear error and leaves its KV cache as it was (the next call's output equals that of a
 * cache that never saw the failed call, and the plain ops' within rounding); rotaryCacheWrite with
 * rotary tables applyRotary refuses throws applyRotary's error and writes nothing; the same for a
 * decode step through forwardResidual (the fused decodeAttention path), whose checks run before it
 * reserves the cache room, including a norm weight the kernel does not take; a static cache's
 * overflow throws with its positions unchanged; every fused op,
 * and quantizeBlocks with a weight arena, refuses tensors on two devices (a host-memory device
 * without kernels stands for the second), naming both, as the plain ops do.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as torch from "../src/index.js";
import { RotaryAttention } from "../src/nn/attention.js";
import { RMSNorm } from "../src/nn/layers.js";
import { gatedMlpResidualQuantized, linearResidualQuantized, normLinearsQuantized } from "../src/tensor/fused_quantized.js";
import { KVCache } from "../src/transformers/cache_utils.js";
import { HostOnlyDevice } from "./helpers/host_only_device.js";
import { lcgValues } from "./helpers/lcg.js";

/** Deterministic pseudo-random float32 tensor with values in [-1, 1). */
function rand(shape: number[], seed: number): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape });
}

test("an attention call with rotary tables or k/v that do not fit throws a clear error and leaves the KV cache unchanged", async () => {
  const [hidden, nq, nkv, d] = [16, 2, 1, 8];
  const attn = new RotaryAttention({ hiddenSize: hidden, numHeads: nq, numKvHeads: nkv, headDim: d, qkvBias: false, oBias: false, window: 0 });
  let seed = 1;
  for (const [, p] of attn.namedParameters()) p.set(rand([...p.shape], seed++).div(2));
  const cacheLayer = () => new KVCache(1, "dynamic", 16).layers[0];
  const cache = cacheLayer();
  const rope = (B: number, L: number, R: number, s: number) => [rand([B, L, R], s), rand([B, L, R], s + 1)];
  const [cos, sin] = rope(1, 3, d, 50);
  const x = rand([1, 3, hidden], 40);
  attn.forward(x, cos, sin, null, cache);
  assert.equal(cache.seqLength, 3);

  const x1 = rand([1, 1, hidden], 41), [c1, s1] = rope(1, 1, d, 60);
  const bad: [string, () => unknown, RegExp][] = [
    ["cos for 2 positions, x of 1", () => attn.forward(x1, ...rope(1, 2, d, 60) as [torch.Tensor, torch.Tensor], null, cache), /rotary: x \[1,1,1,8\] and cos\/sin \[1,2,8\]\/\[1,2,8\] are incompatible/],
    ["sin of another shape", () => attn.forward(x1, c1, s1.narrow(2, 0, 4), null, cache), /rotary: .* are incompatible/],
    ["odd rotary dims", () => attn.forward(x1, c1.narrow(2, 0, 5), s1.narrow(2, 0, 5), null, cache), /rotary: .* are incompatible/],
    ["batch of 2 for a cache of 1", () => attn.forward(rand([2, 1, hidden], 42), ...rope(2, 1, d, 61) as [torch.Tensor, torch.Tensor], null, cache),
      /KV cache: keys \[2,1,1,8\] and values \[2,1,1,8\] do not fit the cached ones \[1, ·, 1, 8\]/],
  ];
  // The same through forwardResidual (a decode step's fused decodeAttention path where it fits),
  // and a norm weight of a dtype no kernel takes (int32).
  const norm = new RMSNorm(hidden, 1e-6), intNorm = new RMSNorm(hidden, 1e-6);
  norm.weight.set(rand([hidden], 70));
  intNorm.weight.set(torch.zeros([hidden], { dtype: "int32" }));
  const viaResidual: [string, () => unknown, RegExp][] = [
    ["cos for 2 positions, x of 1 (forwardResidual)", () => attn.forwardResidual(x1, norm, ...rope(1, 2, d, 60) as [torch.Tensor, torch.Tensor], null, cache, x1), /rotary: .* are incompatible/],
    ["odd rotary dims (forwardResidual)", () => attn.forwardResidual(x1, norm, c1.narrow(2, 0, 5), s1.narrow(2, 0, 5), null, cache, x1), /rotary: .* are incompatible/],
    ["batch of 2 for a cache of 1 (forwardResidual)", () => {
      const x2 = rand([2, 1, hidden], 42);
      return attn.forwardResidual(x2, norm, ...rope(2, 1, d, 61) as [torch.Tensor, torch.Tensor], null, cache, x2);
    }, /KV cache: keys \[2,1,1,8\] and values \[2,1,1,8\] do not fit the cached ones \[1, ·, 1, 8\]/],
    ["an int32 norm weight (forwardResidual)", () => attn.forwardResidual(x1, intNorm, c1, s1, null, cache, x1), /./],
  ];
  for (const [what, call, error] of [...bad, ...viaResidual]) {
    assert.throws(call, error, what);
    assert.equal(cache.seqLength, 3, `${what}: positions seen unchanged`);
    assert.equal(cache.storedLength, 3, `${what}: positions stored unchanged`);
  }
  // The next step attends to the 3 cached positions and itself: exactly as over a cache that never
  // saw the failed calls, and as the plain ops (update() copies, sdpa attends) within rounding.
  const got = Array.from(await attn.forward(x1, c1, s1, null, cache).data(), Number);
  assert.equal(cache.seqLength, 4);
  const step = async (c: ReturnType<typeof cacheLayer>) => {
    attn.forward(x, cos, sin, null, c);
    return Array.from(await attn.forward(x1, c1, s1, null, c).data(), Number);
  };
  assert.deepEqual(got, await step(cacheLayer()));
  const plainCache = cacheLayer();
  (plainCache as { reserve?: unknown }).reserve = undefined;
  const plain = await step(plainCache);
  assert.ok(got.every((g, i) => Math.abs(g - plain[i]) <= 1e-6), `plain ops: ${plain} vs ${got}`);
});

test("a static KV cache that would overflow throws and leaves its positions as they were", () => {
  const cache = new KVCache(1, "static", 4).layers[0];
  cache.update(rand([1, 3, 1, 8], 80), rand([1, 3, 1, 8], 81));
  assert.equal(cache.seqLength, 3);
  for (const reserve of [false, true]) {
    const k = rand([1, 2, 1, 8], 82), v = rand([1, 2, 1, 8], 83);
    assert.throws(() => (reserve ? cache.reserve(k, v) : cache.update(k, v)), /static KV cache overflow: 5 positions needed, max_cache_len is 4/);
    assert.equal(cache.seqLength, 3, `${reserve ? "reserve" : "update"}: positions seen unchanged`);
  }
});

test("rotaryCacheWrite with sin of another shape than cos, odd rotary dims or more rotary dims than D throws rotary's error and writes nothing", async () => {
  const [B, L, Hq, Hkv, D, cap] = [1, 2, 4, 2, 8, 6];
  const q = rand([B, L, Hq, D], 1), k = rand([B, L, Hkv, D], 2), v = rand([B, L, Hkv, D], 3);
  const cases: [string, torch.Tensor, torch.Tensor][] = [
    ["sin of another shape", rand([B, L, 8], 4), rand([B, L, 6], 5)],
    ["odd rotary dims", rand([B, L, 5], 4), rand([B, L, 5], 5)],
    ["rotary dims > head dims", rand([B, L, 10], 4), rand([B, L, 10], 5)],
  ];
  for (const [what, cos, sin] of cases) {
    const kb = rand([B, cap, Hkv, D], 60), vb = rand([B, cap, Hkv, D], 61);
    const [k0, v0] = [Array.from(await kb.data(), Number), Array.from(await vb.data(), Number)];
    assert.throws(() => torch.applyRotary(k, cos, sin), /rotary: .* are incompatible/, `${what}: the plain op throws`);
    assert.throws(() => torch.rotaryCacheWrite(q, k, v, cos, sin, kb, vb, 1), /rotary: x \[1,2,4,8\] and cos\/sin \[.*\]\/\[.*\] are incompatible/, what);
    assert.deepEqual(Array.from(await kb.data(), Number), k0, `${what}: key buffer untouched`);
    assert.deepEqual(Array.from(await vb.data(), Number), v0, `${what}: value buffer untouched`);
  }
});

test("rotaryCacheWrite with v that does not fit its buffer throws before writing k", async () => {
  const [B, L, Hq, Hkv, D, cap] = [1, 1, 4, 2, 8, 6];
  const q = rand([B, L, Hq, D], 1), k = rand([B, L, Hkv, D], 2), v = rand([B, L, Hkv, 6], 3);
  const kb = rand([B, cap, Hkv, D], 60), vb = rand([B, cap, Hkv, D], 61), [cos, sin] = [rand([B, L, D], 4), rand([B, L, D], 5)];
  const k0 = Array.from(await kb.data(), Number);
  assert.throws(() => torch.rotaryCacheWrite(q, k, v, cos, sin, kb, vb, 2),
    /rotary_cache_write: k \[1,1,2,8\] \/ v \[1,1,2,6\] do not fit positions \[2, 3\) of the buffers \[1,6,2,8\] \/ \[1,6,2,8\]/);
  assert.deepEqual(Array.from(await kb.data(), Number), k0, "key buffer untouched");
});

test("the fused ops and quantizeBlocks' weight arena refuse tensors on two devices, naming both", () => {
  torch.registerDevice("hostonly", { synchronous: true, open: () => new HostOnlyDevice() });
  const away = (t: torch.Tensor) => t.to("hostonly");
  const two = (op: string) => new RegExp(`^Error: ${op}: expected all tensors to be on the same device, but found at least two devices, cpu and hostonly$`);
  const [K, I, N] = [64, 32, 64];
  const x = rand([1, 1, K], 1), r = rand([1, 1, N], 2), g = rand([K], 3), w = rand([N, K], 4), gate = rand([I, K], 5), up = rand([I, K], 6), down = rand([N, I], 7);
  const norm = (weight: torch.Tensor) => ({ weight, eps: 1e-6, offset: 0 });
  const calls: [string, () => unknown][] = [
    ["silu_mul", () => torch.siluMul(x, away(x))],
    ["linear_residual", () => torch.linearResidual(x, away(w), null, r)],
    ["linear_residual", () => torch.linearResidual(x, w, null, away(r))],
    ["norm_linears", () => torch.normLinears(x, norm(away(g)), [w])],
    ["norm_linears", () => torch.normLinears(x, null, [w, away(w)])],
    ["gated_mlp_residual", () => torch.gatedMlpResidual(x, null, gate, up, away(down), null, r)],
    ["gated_mlp_residual", () => torch.gatedMlpResidual(x, norm(g), gate, up, down, away(rand([N], 8)), r)],
  ];
  const [B, L, H, D, cap] = [1, 1, 2, 8, 4];
  const q = rand([B, L, H, D], 9), k = rand([B, L, H, D], 10), cos = rand([B, L, D], 11), kb = rand([B, cap, H, D], 12);
  calls.push(["rotary_cache_write", () => torch.rotaryCacheWrite(q, k, k, cos, cos, kb, away(kb), 0)]);
  calls.push(["rotary_cache_write", () => torch.rotaryCacheWrite(q, k, k, away(cos), cos, kb, kb, 0)]);
  const qw = (t: torch.Tensor, move = false) => {
    const { q: codes, scales } = torch.quantizeBlocks(t, 8);
    return { q: codes, scales: move ? away(scales) : scales, bits: 8 as const };
  };
  calls.push(["norm_linears_quantized", () => normLinearsQuantized(x, norm(g), [qw(gate), qw(up, true)])]);
  calls.push(["linear_residual_quantized", () => linearResidualQuantized(x, qw(w, true), null, r)]);
  calls.push(["gated_mlp_residual_quantized", () => gatedMlpResidualQuantized(x, norm(away(g)), qw(gate), qw(up), qw(down), null, r)]);
  // decodeAttentionResidual: q/k/v [H*D, K], o [N, H*D], rotary [B, 1, D]; a weight or the room on the other device.
  const [wq, wo] = [rand([H * D, K], 13), rand([N, H * D], 14)], room = { keyBuffer: kb, valueBuffer: kb, at: 1 };
  const heads = { numHeads: H, numKvHeads: H, headDim: D, scale: 0.35, softcap: 0 };
  const outs = { q: rand([B, 1, H, D], 15), k: rand([B, 1, H, D], 16), v: rand([B, 1, H, D], 17) };
  calls.push(["decode_attention", () => torch.decodeAttentionResidual(x, norm(g), [wq, away(wq), wq], null, cos, cos, room, heads, wo, null, r, outs)]);
  calls.push(["decode_attention", () => torch.decodeAttentionResidual(x, norm(g), [wq, wq, wq], null, cos, cos, { ...room, valueBuffer: away(kb) }, heads, wo, null, r, outs)]);
  for (const [op, call] of calls) assert.throws(call, two(op), op);

  const cpuArena = x.device.weightArena!(), hostDevice = away(x).device;
  assert.throws(() => torch.quantizeBlocks(w, 8, { device: hostDevice, allocate: (n) => hostDevice.allocate(n) }),
    /^Error: quantize_blocks: expected the weight arena on the weight's device, but found two devices, cpu \(weight\) and hostonly \(arena\)$/);
  assert.throws(() => torch.quantizeBlocks(away(w), 8, cpuArena), /quantize_blocks: .* hostonly \(weight\) and cpu \(arena\)$/);
});
