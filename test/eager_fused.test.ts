/**
 * The fused ops nn modules call in eager mode (tensor/fused.ts) against the plain ops they stand
 * for: siluMul equal to mul(silu(g), u); gatedMlpResidual (linearGroup then linearAdd on cpu) and
 * linearResidual (one linearAdd) bit-equal to the plain ops, with and without a bias (a bias and
 * residual that would round differently if the kernel summed them first included), normLinears
 * (one linearGroup) equal to rmsNorm then linears, for one row (decode), prefill rows and a
 * batch, float32 and bfloat16 weights, and their fallbacks (other dtypes, broadcasting, inside a
 * trace); rotaryCacheWrite (one rotaryKVWrite) equal to applyRotary and copies into the cache buffer,
 * and with Qwen3's q/k norms (one normRotaryKVWrite) equal to rmsNorm first; Qwen3's decode steps
 * through that path against transformers' logits; decodeAttentionResidual (one decodeAttention call:
 * the attention half of a decode step) bit-equal to the four fused ops it stands for, float32,
 * bfloat16, int8 and int4 weights, with and without the input norm and q/k norms (offset 0 and 1),
 * GQA and MHA, float32, bfloat16 and float16 caches, v heads smaller than q/k's, positions 0 to
 * capacity - 1, partial rotary, a bias and soft-capping, and with scratch that does not fit (the
 * separate ops).
 * Then a decoder LM (stories260K) whose layers take the fused paths against the same model with them
 * switched off.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { hasKernel, setKernelObserver } from "../src/devices/kernels.js";
import * as torch from "../src/index.js";
import { RotaryAttention } from "../src/nn/attention.js";
import { KVCache } from "../src/transformers/cache_utils.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { graphLog } from "./helpers/graph_log.js";
import { lcgValues } from "./helpers/lcg.js";
import { maxAbsDiff, missing, STORIES, TINY } from "./helpers/shared.js";

/** Deterministic pseudo-random float32 tensor with values in [-1, 1). */
function rand(shape: number[], seed: number): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape });
}

/** The fused kernels the eager decoder layer may call. */
const FUSED = new Set(["linearGroup", "linearAdd", "rotaryKVWrite", "linearGroupQuantized", "linearAddQuantized", "pagedAttention", "decodeAttention"]);

/** The kernels `f` calls, by op name, in order. */
function kernelsOf(f: () => unknown): string[] {
  const ops: string[] = [];
  const prev = setKernelObserver((op, _device, fn, args) => (ops.push(op), fn(...args)));
  try { f(); } finally { setKernelObserver(prev); }
  return ops;
}

async function close(a: torch.Tensor, b: torch.Tensor, tol: number, what: string): Promise<void> {
  assert.deepEqual(a.shape, b.shape, `${what}: shape`);
  assert.equal(a.dtype, b.dtype, `${what}: dtype`);
  const d = maxAbsDiff(Array.from(await a.data(), Number), Array.from(await b.data(), Number));
  assert.ok(d <= tol, `${what}: max |fused - plain| = ${d} > ${tol}`);
}

test("siluMul equals mul(silu(gate), up) exactly, and falls back for half inputs and broadcasting", async () => {
  for (const shape of [[1, 1, 3072], [3, 5, 64], [0, 4]]) {
    const g = rand(shape, 1).mul(4), u = rand(shape, 2);
    await close(torch.siluMul(g, u), torch.mul(torch.silu(g), u), 0, `float32 [${shape}]`);
  }
  assert.deepEqual(kernelsOf(() => torch.siluMul(rand([4], 1), rand([4], 2))), ["fusedElementwise"], "one pass on cpu");
  const g = rand([2, 8], 3), u = rand([8], 4);
  await close(torch.siluMul(g, u), torch.mul(torch.silu(g), u), 0, "broadcast up");
  const gh = g.to("bfloat16"), uh = rand([2, 8], 5).to("bfloat16");
  await close(torch.siluMul(gh, uh), torch.mul(torch.silu(gh), uh), 0, "bfloat16 (plain ops, bfloat16 out)");
  // A strided (transposed) gate reads through its strides.
  const gt = rand([8, 2], 6).transpose(0, 1), ut = rand([2, 8], 7);
  await close(torch.siluMul(gt, ut), torch.mul(torch.silu(gt), ut), 0, "strided gate");
});

for (const dtype of ["float32", "bfloat16"] as const) {
  test(`gatedMlpResidual (${dtype} weights) equals rmsNorm, linears, SiLU * up, down and the residual add`, async () => {
    const [K, I, N] = [64, 96, 64];
    const gate = rand([I, K], 10).to(dtype), up = rand([I, K], 11).to(dtype), down = rand([N, I], 12).div(4).to(dtype);
    const normW = rand([K], 13).to(dtype), bias = rand([N], 14).to(dtype);
    const plain = (x: torch.Tensor, r: torch.Tensor, offset: number, b: torch.Tensor | null, norm = true) => {
      const n = norm ? torch.rmsNorm(x, normW, 1e-6, offset) : x;
      return torch.add(r, torch.linear(torch.mul(torch.silu(torch.linear(n, gate)), torch.linear(n, up)), down, b));
    };
    for (const [lead, seed] of [[[1, 1], 1], [[1, 7], 2], [[3, 1], 3], [[2, 5], 4]] as const) {
      const x = rand([...lead, K], seed), r = rand([...lead, N], seed + 20);
      for (const offset of [0, 1]) {
        const fused = torch.gatedMlpResidual(x, { weight: normW, eps: 1e-6, offset }, gate, up, down, null, r);
        await close(fused, plain(x, r, offset, null), 0, `[${lead}] rows, offset ${offset}`);
      }
      assert.deepEqual(kernelsOf(() => torch.gatedMlpResidual(x, null, gate, up, down, bias, r)), ["linearGroup", "linearAdd"], "two calls on cpu");
      await close(torch.gatedMlpResidual(x, null, gate, up, down, bias, r), plain(x, r, 0, bias, false), 0, `[${lead}] rows, no norm, down bias`);
    }
    // Fallbacks: a bfloat16 activation (plain ops, which compute in float32 as well).
    const xh = rand([1, 1, K], 30).to("bfloat16"), r = rand([1, 1, N], 31);
    await close(torch.gatedMlpResidual(xh, { weight: normW, eps: 1e-6, offset: 0 }, gate, up, down, null, r), plain(xh, r, 0, null), 0, "bfloat16 input");
  });

  test(`linearResidual (${dtype} weight) equals add(residual, linear(x, w, bias))`, async () => {
    const w = rand([48, 80], 40).to(dtype), b = rand([48], 41).to(dtype);
    for (const [lead, seed] of [[[1, 1], 1], [[1, 9], 2], [[4, 1], 3]] as const) {
      const x = rand([...lead, 80], seed), r = rand([...lead, 48], seed + 10);
      await close(torch.linearResidual(x, w, b, r), torch.add(r, torch.linear(x, w, b)), 0, `[${lead}] rows, bias`);
      await close(torch.linearResidual(x, w, null, r), torch.add(r, torch.linear(x, w)), 0, `[${lead}] rows`);
      assert.deepEqual(kernelsOf(() => torch.linearResidual(x, w, b, r)), ["linearAdd"], "one call on cpu");
    }
  });
}

/** The float32 bit patterns of `t`'s values. */
async function bits(t: torch.Tensor): Promise<number[]> {
  return Array.from(new Uint32Array(new Float32Array(Array.from(await t.data(), Number)).buffer));
}

test("linearResidual and gatedMlpResidual with a bias round as the plain ops: (dot + bias) + residual, not dot + (bias + residual)", async () => {
  // A large bias and a residual of opposite sign: dot + bias drops the dot's low bits, which
  // dot + (bias + residual) would keep, so the two orders differ in many elements.
  const [K, I, N] = [64, 96, 48];
  const w = rand([N, K], 80), bias = rand([N], 81).mul(3e4).add(1e5), gate = rand([I, K], 82), up = rand([I, K], 83), down = rand([N, I], 84);
  for (const [lead, seed] of [[[1, 1], 1], [[1, 3], 2]] as const) {
    const x = rand([...lead, K], seed), r = bias.neg().add(rand([...lead, N], seed + 1));
    const h = torch.mul(torch.silu(torch.linear(x, gate)), torch.linear(x, up));
    for (const [what, fused, dot] of [
      ["linearResidual", torch.linearResidual(x, w, bias, r), torch.linear(x, w)],
      ["gatedMlpResidual", torch.gatedMlpResidual(x, null, gate, up, down, bias, r), torch.linear(h, down)],
    ] as const) {
      const plain = torch.add(r, torch.add(dot, bias)), folded = torch.add(dot, torch.add(bias, r));
      const [p, f] = [await bits(plain), await bits(folded)];
      assert.ok(p.filter((b, i) => b !== f[i]).length >= N / 4, `${what} [${lead}]: the values tell the two orders apart`);
      assert.deepEqual(await bits(fused), p, `${what} [${lead}]: bit-equal to the plain ops`);
    }
  }
});

for (const dtype of ["float32", "bfloat16"] as const) {
  test(`normLinears (${dtype} weights) equals linear(rmsNorm(x), w) for each weight`, async () => {
    const ws = [rand([64, 48], 50), rand([32, 48], 51), rand([32, 48], 52)].map((w) => w.to(dtype));
    const g = rand([48], 53).to(dtype);
    for (const [lead, seed] of [[[1, 1], 1], [[1, 6], 2], [[3, 1], 3]] as const) {
      const x = rand([...lead, 48], seed);
      for (const count of [1, 3]) {
        const got = torch.normLinears(x, { weight: g, eps: 1e-6, offset: 1 }, ws.slice(0, count));
        const n = torch.rmsNorm(x, g, 1e-6, 1);
        for (let i = 0; i < count; i++) await close(got[i], torch.linear(n, ws[i]), 0, `[${lead}] rows, weight ${i} of ${count}`);
      }
      const bare = torch.normLinears(x, null, ws.slice(0, 2));
      for (let i = 0; i < 2; i++) await close(bare[i], torch.linear(x, ws[i]), 0, `[${lead}] rows, no norm, weight ${i}`);
    }
    assert.deepEqual(kernelsOf(() => torch.normLinears(rand([1, 48], 9), { weight: g, eps: 1e-6, offset: 0 }, ws)), ["linearGroup"], "one call on cpu");
    const four = [...ws, ws[0]];
    assert.deepEqual(kernelsOf(() => torch.normLinears(rand([1, 48], 9), null, four)), ["linear", "linear", "linear", "linear"], "more than 3 weights: plain linears");
  });
}

for (const dtype of ["float32", "bfloat16"] as const) {
  test(`rotaryCacheWrite (${dtype} cache) equals applyRotary(q), and applyRotary(k) and v copied into the cache buffers`, async () => {
    for (const [B, L, at, seed] of [[1, 1, 5, 1], [2, 3, 0, 2], [1, 4, 6, 3]] as const) {
      const [Hq, Hkv, D, R, cap] = [4, 2, 8, 6, 10];
      const q = rand([B, L, Hq, D], seed), k = rand([B, L, Hkv, D], seed + 1), v = rand([B, L, Hkv, D], seed + 2);
      const cos = rand([B, L, R], seed + 3), sin = rand([B, L, R], seed + 4);
      const bufs = () => [rand([B, cap, Hkv, D], 60).to(dtype), rand([B, cap, Hkv, D], 61).to(dtype)];
      const [kb, vb] = bufs(), [kw, vw] = bufs();
      let got: torch.Tensor | null = null;
      const ops = kernelsOf(() => (got = torch.rotaryCacheWrite(q, k, v, cos, sin, kb, vb, at)));
      assert.deepEqual(ops, ["rotaryKVWrite"], "one call on cpu");
      torch.copyInto(torch.applyRotary(k, cos, sin), kw.narrow(1, at, L));
      torch.copyInto(v, vw.narrow(1, at, L));
      await close(got!, torch.applyRotary(q, cos, sin), 0, `B ${B}, L ${L}: q`);
      await close(kb, kw, 0, `B ${B}, L ${L}: key buffer (other positions untouched)`);
      await close(vb, vw, 0, `B ${B}, L ${L}: value buffer`);
    }
    // Fallback: a non-contiguous buffer takes the plain ops.
    const big = rand([1, 6, 2, 16], 70).to(dtype);
    const kb = big.narrow(3, 0, 8), vb = rand([1, 6, 2, 8], 71).to(dtype);
    const ops = kernelsOf(() => torch.rotaryCacheWrite(rand([1, 1, 2, 8], 1), rand([1, 1, 2, 8], 2), rand([1, 1, 2, 8], 3), rand([1, 1, 8], 4), rand([1, 1, 8], 5), kb, vb, 2));
    assert.deepEqual(ops, ["rotary", "rotary", "copy", "copy"], "strided buffer: plain ops");
  });
}

for (const normDtype of ["float32", "bfloat16"] as const) {
  test(`rotaryCacheWrite with q/k norms (${normDtype} weights) equals rmsNorm then rotaryCacheWrite, in one normRotaryKVWrite call`, async () => {
    const [Hq, Hkv, D, R, cap] = [4, 2, 16, 12, 9];
    for (const [B, L, at, offset, cacheDtype, seed] of [[1, 1, 4, 0, "float32", 1], [2, 3, 0, 1, "bfloat16", 2], [1, 2, 7, 0, "float16", 3]] as const) {
      const q = rand([B, L, Hq, D], seed).mul(3), k = rand([B, L, Hkv, D], seed + 1).mul(3), v = rand([B, L, Hkv, D], seed + 2);
      const cos = rand([B, L, R], seed + 3), sin = rand([B, L, R], seed + 4);
      const norm = { q: rand([D], seed + 5).to(normDtype), k: rand([D], seed + 6).to(normDtype), eps: 1e-6, offset };
      const bufs = () => [rand([B, cap, Hkv, D], 60).to(cacheDtype), rand([B, cap, Hkv, D], 61).to(cacheDtype)];
      const [kb, vb] = bufs(), [kw, vw] = bufs();
      let got: torch.Tensor | null = null;
      const ops = kernelsOf(() => (got = torch.rotaryCacheWrite(q, k, v, cos, sin, kb, vb, at, norm)));
      assert.deepEqual(ops, ["normRotaryKVWrite"], "one call on cpu");
      const want = torch.rotaryCacheWrite(torch.rmsNorm(q, norm.q, 1e-6, offset), torch.rmsNorm(k, norm.k, 1e-6, offset), v, cos, sin, kw, vw, at);
      const what = `B ${B}, L ${L}, offset ${offset}, ${cacheDtype} cache`;
      await close(got!, want, 0, `${what}: q`);
      await close(kb, kw, 0, `${what}: key buffer`);
      await close(vb, vw, 0, `${what}: value buffer`);
    }
    // Norm weights of two dtypes, or of the wrong size, take the plain ops (rmsNorm's error for the latter).
    const [q, k, v, cos, sin] = [rand([1, 1, 2, 8], 1), rand([1, 1, 2, 8], 2), rand([1, 1, 2, 8], 3), rand([1, 1, 8], 4), rand([1, 1, 8], 5)];
    const [kb, vb] = [rand([1, 4, 2, 8], 6), rand([1, 4, 2, 8], 7)];
    const mixed = { q: rand([8], 8), k: rand([8], 9).to("bfloat16"), eps: 1e-6, offset: 0 };
    assert.deepEqual(kernelsOf(() => torch.rotaryCacheWrite(q, k, v, cos, sin, kb, vb, 1, mixed)), ["rmsNorm", "rmsNorm", "rotaryKVWrite"]);
    assert.throws(() => torch.rotaryCacheWrite(q, k, v, cos, sin, kb, vb, 2, { ...mixed, k: rand([4], 9) }), /rms_norm|rmsNorm|shape/i);
    const untouched = Array.from(await rand([1, 4, 2, 8], 6).data(), Number);
    assert.deepEqual(Array.from(await kb.narrow(1, 2, 2).data(), Number), untouched.slice(32), "nothing written at 2 by the call that threw");
  });
}

test("Qwen3's decode steps (each layer's attention half, q/k norms included, in one decodeAttention call) give transformers' logits at every position (tiny fixture)", async (t) => {
  const dir = path.join(TINY, "qwen3");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(dir);
  const e = JSON.parse(readFileSync(path.join(dir, "expected.json"), "utf8")) as { input_ids: number[][]; logits: number[][][] };
  const ids = e.input_ids[0], prompt = 3;
  const cache = new KVCache(model.numLayers, "dynamic", ids.length, "float32");
  const step = (chunk: number[], past: number) => model.forward({
    inputIds: model.idsTensor([chunk]), positionIds: [chunk.map((_, i) => past + i)], attentionMask: null, cache,
  });
  const first = Array.from(await step(ids.slice(0, prompt), 0).data(), Number);
  for (let p = 0; p < prompt; p++) {
    const d = maxAbsDiff(first.slice(p * 512, (p + 1) * 512), e.logits[0][p]);
    assert.ok(d < 1e-4, `prefill position ${p}: max |tsorch - transformers| = ${d}`);
  }
  for (let p = prompt; p < ids.length; p++) {
    let logits: torch.Tensor | null = null;
    const ops = kernelsOf(() => (logits = step([ids[p]], p)));
    assert.equal(ops.filter((op) => op === "decodeAttention").length, model.numLayers, "one fused attention step per layer");
    assert.equal(ops.filter((op) => op === "rotaryKVWrite" || op === "normRotaryKVWrite" || op === "pagedAttention").length, 0);
    const d = maxAbsDiff(Array.from(await logits!.data(), Number), e.logits[0][p]);
    assert.ok(d < 1e-4, `decode position ${p}: max |tsorch - transformers| = ${d}`);
  }
});

test("Qwen3 attention with a replaced q_norm forward that throws leaves the KV cache as it was (norms run before reserve)", async (t) => {
  const dir = path.join(TINY, "qwen3");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(dir);
  const cache = new KVCache(model.numLayers, "dynamic", 8, "float32");
  const step = (ids: number[], past: number) => model.forward({
    inputIds: model.idsTensor([ids]), positionIds: [ids.map((_, i) => past + i)], attentionMask: null, cache,
  });
  await step([1, 2, 3], 0).data();
  const layers = (model as unknown as { model: { layers: { items: { self_attn: { q_norm: { forward: (x: torch.Tensor) => torch.Tensor } } }[] } } }).model.layers.items;
  layers[0].self_attn.q_norm.forward = () => { throw new Error("norm kernel failed"); };
  assert.throws(() => step([4], 3), /norm kernel failed/);
  assert.deepEqual(cache.layers.map((l) => l.seqLength), cache.layers.map(() => 3), "no layer counted the failed step's position");
});

test("inside a trace the fused ops record the plain ops (compile's passes choose the fusions)", () => {
  torch.compiler.reset();
  const [K, I] = [32, 64];
  const gate = rand([I, K], 1), up = rand([I, K], 2), down = rand([K, I], 3), w = rand([K, K], 4), g = rand([K], 5);
  const fused = torch.compile(function block(x: torch.Tensor, r: torch.Tensor) {
    const h = torch.linearResidual(x, w, null, r);
    return torch.gatedMlpResidual(h, { weight: g, eps: 1e-6, offset: 0 }, gate, up, down, null, h);
  });
  const plain = torch.compile(function block(x: torch.Tensor, r: torch.Tensor) {
    const h = torch.add(r, torch.linear(x, w));
    const n = torch.rmsNorm(h, g, 1e-6);
    return torch.add(h, torch.linear(torch.mul(torch.silu(torch.linear(n, gate)), torch.linear(n, up)), down));
  });
  const log = (f: typeof fused) => graphLog(() => f(rand([1, 1, K], 6), rand([1, 1, K], 7)));
  // Traced as the same 9 plain ops, which the passes fuse the same way.
  const plainLog = log(plain);
  assert.equal(log(fused), plainLog);
  assert.match(plainLog, /block: \d kernel calls \(0 dead removed, [1-9] fused away\)/);
});

for (const dtype of ["float32", "bfloat16", "int8"] as const) {
  test(`a decoder LM's eager forward with the fused residual paths equals it without them (stories260K, ${dtype}, prompt then decode steps)`, async (t) => {
    const skip = missing(STORIES);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype });
    const prompt = [1, 403, 407, 261, 378];
    const kernels: number[] = [];
    const run = async (fusedCache: boolean) => {
      const cache = new KVCache(model.numLayers, "dynamic", prompt.length + 3, dtype === "int8" ? "float32" : dtype);
      // Without reserve, attention rotates q and k and calls update() (the plain ops).
      if (!fusedCache) for (const l of cache.layers) (l as { reserve?: unknown }).reserve = undefined;
      const step = (ids: number[], past: number) => model.forward({
        inputIds: model.idsTensor([ids]), positionIds: [ids.map((_, i) => past + i)], attentionMask: null, cache,
      });
      const out = [Array.from(await step(prompt, 0).data(), Number)];
      for (const [i, id] of [12, 250, 3].entries()) {
        let logits: torch.Tensor | null = null;
        const ops = kernelsOf(() => (logits = step([id], prompt.length + i)));
        kernels.push(ops.filter((op) => FUSED.has(op)).length);
        out.push(Array.from(await logits!.data(), Number));
      }
      return out;
    };
    const fused = await run(true);
    const layers = model.numLayers;
    // The attention half of a decode step is one decodeAttention call (norm, q/k/v, rotary, KV write,
    // attention in place, o_proj and residual); the MLP two (linearGroup, linearAdd) where its
    // linears are plain float, or all quantized (int8: stories260K's down_proj, of input size 172,
    // stays float, so its MLP takes the plain ops).
    const quantizedMlp = (l: { ffn: { down_proj: { quantized: unknown } } }) => !!l.ffn.down_proj.quantized;
    const items = (model as unknown as { model: { layers: { items: { ffn: { down_proj: { quantized: unknown } } }[] } } }).model.layers.items;
    const perStep = dtype !== "int8" ? 3 * layers : items.reduce((n, l) => n + 1 + (quantizedMlp(l) && hasKernel("linearGroupQuantized" as never, "cpu") ? 2 : 0), 0);
    assert.deepEqual(kernels.splice(0), [1, 2, 3].map(() => perStep), "a decode step: the attention half in one call, the MLP in 2 calls per layer");
    // Replacing forwards on the instances turns the fused paths off (they only run for unmodified modules).
    for (const layer of (model as unknown as { model: { layers: { items: object[] } } }).model.layers.items) {
      const l = layer as unknown as { self_attn: { forward: Function }; ffn: { forward: Function } };
      l.self_attn.forward = l.self_attn.forward.bind(l.self_attn);
      l.ffn.forward = l.ffn.forward.bind(l.ffn);
    }
    const plain = await run(false);
    assert.deepEqual(kernels, [0, 0, 0], "switched off");
    for (let i = 0; i < plain.length; i++) {
      const d = maxAbsDiff(fused[i], plain[i]);
      assert.ok(d <= 1e-5, `step ${i}: max |fused - plain| logit = ${d}`);
    }
  });
}

for (const wdtype of ["float32", "bfloat16", "int8", "int4"] as const) {
  test(`decodeAttentionResidual (${wdtype} weights) is one decodeAttention call equal to normLinears, rotaryCacheWrite, cacheDecodeAttention and linearResidual`, async () => {
    const { cacheDecodeAttention } = await import("../src/tensor/paged_attention.js");
    const { normLinearsQuantized, linearResidualQuantized } = await import("../src/tensor/fused_quantized.js");
    const [K, D, cap] = [64, 16, 8];
    const cases = [
      { B: 1, Hq: 4, Hkv: 2, Dv: 16, R: 16, at: 5, norm: true, qkNorm: 0, bias: false, kv: "float32", softcap: 0, scratch: true },
      { B: 2, Hq: 4, Hkv: 4, Dv: 16, R: 8, at: 7, norm: true, qkNorm: null, bias: true, kv: "bfloat16", softcap: 0.5, scratch: true },
      // float16 buffers take static_attention's general path; no input norm; Gemma-style (1 + w) q/k norms.
      { B: 2, Hq: 8, Hkv: 1, Dv: 8, R: 16, at: 0, norm: false, qkNorm: 1, bias: false, kv: "float16", softcap: 0, scratch: true },
      // Scratch of the wrong shape: the separate ops (same values).
      { B: 1, Hq: 4, Hkv: 2, Dv: 16, R: 16, at: 3, norm: true, qkNorm: 0, bias: true, kv: "float32", softcap: 0, scratch: false },
    ] as const;
    let seed = 100;
    for (const c of cases) {
      const what = JSON.stringify(c);
      const weight = (n: number, k: number): torch.ProjectionWeight => wdtype === "int8" || wdtype === "int4"
        ? { ...torch.quantizeBlocks(rand([n, k], seed++), wdtype === "int8" ? 8 : 4), bits: wdtype === "int8" ? 8 : 4 }
        : rand([n, k], seed++).to(wdtype);
      const qkv = [weight(c.Hq * D, K), weight(c.Hkv * D, K), weight(c.Hkv * c.Dv, K)], o = weight(K, c.Hq * c.Dv);
      const bias = c.bias ? rand([K], seed++) : null, norm = c.norm ? { weight: rand([K], seed++), eps: 1e-6, offset: 0 } : null;
      const qkNorm = c.qkNorm === null ? null : { q: rand([D], seed++), k: rand([D], seed++), eps: 1e-6, offset: c.qkNorm };
      const x = rand([c.B, 1, K], seed++), residual = rand([c.B, 1, K], seed++);
      const cos = rand([c.B, 1, c.R], seed++), sin = rand([c.B, 1, c.R], seed++);
      const buffers = () => [rand([c.B, cap, c.Hkv, D], 90).to(c.kv), rand([c.B, cap, c.Hkv, c.Dv], 91).to(c.kv)];
      const [kBuf, vBuf] = buffers(), [kBuf2, vBuf2] = buffers();
      const heads = { numHeads: c.Hq, numKvHeads: c.Hkv, headDim: D, valueDim: c.Dv, scale: D ** -0.5, softcap: c.softcap };
      const outs = { q: torch.zeros([c.B, 1, c.Hq, D]), k: torch.zeros([c.B, 1, c.Hkv, D]), v: torch.zeros([c.B, 1, c.Hkv, c.scratch ? c.Dv : c.Dv + 1]) };
      let y: torch.Tensor | null = null;
      const ops = kernelsOf(() => (y = torch.decodeAttentionResidual(x, norm, qkv, qkNorm, cos, sin, { keyBuffer: kBuf, valueBuffer: vBuf, at: c.at }, heads, o, bias, residual, outs)));
      assert.equal(ops.includes("decodeAttention"), c.scratch, `${what}: one kernel call only with fitting scratch`);
      if (c.scratch) assert.deepEqual(ops, ["decodeAttention"], what);
      const quant = wdtype === "int8" || wdtype === "int4";
      const [q, k, v] = (quant ? normLinearsQuantized(x, norm, qkv as never) : torch.normLinears(x, norm, qkv as torch.Tensor[]))
        .map((t, i) => t.view(c.B, 1, i === 0 ? c.Hq : c.Hkv, i === 2 ? c.Dv : D));
      const a = cacheDecodeAttention(torch.rotaryCacheWrite(q, k, v, cos, sin, kBuf2, vBuf2, c.at, qkNorm), kBuf2, vBuf2, c.at, { scale: heads.scale, softcap: c.softcap });
      const y2 = quant ? linearResidualQuantized(a, o as never, bias, residual) : torch.linearResidual(a, o as torch.Tensor, bias, residual);
      await close(y!, y2, 0, `${what}: out`);
      await close(kBuf, kBuf2, 0, `${what}: key buffer`);
      await close(vBuf, vBuf2, 0, `${what}: value buffer`);
    }
  });
}

test("the block-quantized fused ops equal the plain quantized ops (fused kernels where the device registers them)", async (t) => {
  const { normLinearsQuantized, linearResidualQuantized, gatedMlpResidualQuantized } = await import("../src/tensor/fused_quantized.js");
  const { hasKernel } = await import("../src/devices/kernels.js");
  const fused = hasKernel("linearGroupQuantized" as never, "cpu") && hasKernel("linearAddQuantized" as never, "cpu");
  if (!fused) t.diagnostic("cpu registers no linearGroupQuantized/linearAddQuantized here: only the plain fallback of the quantized fused ops is exercised");
  // K = 128: one decode row of int4 takes the kernel holding its codes in registers (avx512-vnni),
  // through linearGroupQuantized's products as through linearQuantized; I = 96 (down's K) does not.
  const [K, I, N] = [128, 96, 64];
  for (const bits of [8, 4] as const) {
    const qw = (n: number, k: number, seed: number) => ({ ...torch.quantizeBlocks(rand([n, k], seed), bits), bits });
    const gate = qw(I, K, 1), up = qw(I, K, 2), down = qw(N, I, 3), o = qw(N, K, 4);
    const g = rand([K], 5), bias = rand([N], 6);
    const lin = (x: torch.Tensor, w: typeof gate, b: torch.Tensor | null = null) => torch.linearQuantized(x, w.q, w.scales, bits, b);
    for (const [lead, seed] of [[[1, 1], 10], [[1, 5], 11], [[2, 1], 12]] as const) {
      const x = rand([...lead, K], seed), r = rand([...lead, N], seed + 1);
      const n = torch.rmsNorm(x, g, 1e-6);
      const norm = { weight: g, eps: 1e-6, offset: 0 };
      let got: torch.Tensor[] = [];
      const opsQkv = kernelsOf(() => (got = normLinearsQuantized(x, norm, [gate, up])));
      for (const [i, w] of [gate, up].entries()) await close(got[i], lin(n, w), 1e-5, `${bits}-bit [${lead}]: normLinearsQuantized ${i}`);
      let y: torch.Tensor | null = null;
      const opsO = kernelsOf(() => (y = linearResidualQuantized(x, o, bias, r)));
      await close(y!, torch.add(r, lin(x, o, bias)), 1e-5, `${bits}-bit [${lead}]: linearResidualQuantized`);
      const opsMlp = kernelsOf(() => (y = gatedMlpResidualQuantized(x, norm, gate, up, down, null, r)));
      await close(y!, torch.add(r, lin(torch.mul(torch.silu(lin(n, gate)), lin(n, up)), down)), 1e-5, `${bits}-bit [${lead}]: gatedMlpResidualQuantized`);
      assert.deepEqual([opsQkv, opsO, opsMlp], fused
        ? [["linearGroupQuantized"], ["linearAddQuantized"], ["linearGroupQuantized", "linearAddQuantized"]]
        : [["rmsNorm", "linearQuantizedGroup"], ["linearQuantized", "binary"], ["rmsNorm", "linearQuantizedGroup", "fusedElementwise", "linearQuantized", "binary"]]);
    }
  }
});

test("eager decode attention read in place from the cache equals update() + sdpa (batches, head ratios, half caches, growth, softcap); masks, sinks and windows take sdpa", async () => {
  let seed = 1;
  const next = (shape: number[]) => rand(shape, seed++).div(2);
  const rope = (B: number, L: number, R: number, past: number) => {
    const c: number[] = [], s: number[] = [];
    for (let b = 0; b < B; b++) for (let t = 0; t < L; t++) for (let r = 0; r < R; r++) {
      const a = (past + t) * 10000 ** (-(2 * (r % (R / 2))) / R);
      c.push(Math.cos(a)), s.push(Math.sin(a));
    }
    return [torch.tensor(c, { shape: [B, L, R] }), torch.tensor(s, { shape: [B, L, R] })];
  };
  type Case = { B: number; Hq: number; Hkv: number; dtype: "float32" | "bfloat16" | "float16"; maxLen: number; softcap?: number; window?: number; sinks?: boolean; mask?: boolean };
  /** Outputs of a prompt of 3 then 12 decode steps, with the cache's reserve (in place) or without (update + sdpa), and the attention kernels called. */
  const run = async (c: Case, inPlace: boolean) => {
    seed = 7;
    const attn = new RotaryAttention({ hiddenSize: 32, numHeads: c.Hq, numKvHeads: c.Hkv, headDim: 16, qkvBias: false, oBias: false, window: c.window ?? 0, softcap: c.softcap, sinks: c.sinks });
    for (const [, p] of attn.namedParameters()) p.set(next([...p.shape]));
    const cache = new KVCache(1, "dynamic", c.maxLen, c.dtype).layers[0];
    if (!inPlace) (cache as { reserve?: unknown }).reserve = undefined;
    const outs: number[][] = [], ops: string[] = [];
    for (let step = 0, past = 0; step < 13; step++) {
      const L = step === 0 ? 3 : 1;
      const [cos, sin] = rope(c.B, L, 16, past);
      const mask = c.mask ? torch.zeros([c.B, 1, L, past + L]) : null;
      let y: torch.Tensor | null = null;
      const seen = kernelsOf(() => (y = attn.forward(next([c.B, L, 32]), cos, sin, mask, cache)));
      outs.push(Array.from(await y!.data(), Number));
      if (step > 0) ops.push(...seen.filter((op) => op === "pagedAttention" || op === "sdpa"));
      past += L;
    }
    return { outs, ops };
  };
  const cases: Case[] = [
    { B: 1, Hq: 4, Hkv: 2, dtype: "float32", maxLen: 6 },
    { B: 3, Hq: 8, Hkv: 1, dtype: "bfloat16", maxLen: 4, softcap: 0.5 },
    { B: 2, Hq: 4, Hkv: 4, dtype: "float16", maxLen: 32 },
  ];
  for (const c of cases) {
    const [fast, plain] = [await run(c, true), await run(c, false)];
    assert.deepEqual(fast.ops, Array(12).fill("pagedAttention"), JSON.stringify(c));
    for (let i = 0; i < fast.outs.length; i++) {
      const d = maxAbsDiff(fast.outs[i], plain.outs[i]);
      assert.ok(d <= 1e-6, `${JSON.stringify(c)} step ${i}: max |in place - sdpa| = ${d}`);
    }
  }
  for (const c of [{ window: 4 }, { sinks: true }, { mask: true }] as Partial<Case>[]) {
    const { ops } = await run({ B: 1, Hq: 4, Hkv: 2, dtype: "float32", maxLen: 16, ...c }, true);
    assert.deepEqual(ops, Array(12).fill("sdpa"), JSON.stringify(c));
  }
});
