/**
 * compile's linear fusions with block-quantized weights on cpu (int8 / int4, llama.cpp's q8_0 /
 * q4_0 layouts): the linear grouping, epilogue and linear-argmax passes make linearGroupQuantized
 * (RMS-norm prologue, SiLU(gate) * up epilogue), linearAddQuantized (the residual add) and
 * linearArgmaxQuantized (the LM head's argmax) of linearQuantized / linearQuantizedGroup nodes.
 * The fused kernels run linearQuantized's kernels (the input quantized once per call), so values
 * are eager's (within 1e-5) and ids equal; eager itself matches the dequantize-then-run reference
 * (quantized_weights.test.ts). Checked: kernel calls per graph, one row (the dot path) and more
 * rows (the GEMM path), ties and NaN logits in the head, the fallbacks (a bias, logits kept, mixed
 * bits), and the tiny Qwen3 fixture quantized at load: a compiled decode step has as many kernel
 * calls as the float model's, eager's greedy ids and logits (1e-5). The op-level cases also run
 * on the other quantized paths of linearQuantized (float activations; the portable integer
 * kernels, whose dot path takes every row count).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import * as torch from "../src/index.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { graphLog } from "./helpers/graph_log.js";
import { lcgValues } from "./helpers/lcg.js";
import { maxAbsDiff, missing, TINY } from "./helpers/shared.js";
import { checkStaticLogits } from "./helpers/static_checks.js";

function rand(shape: number[], seed: number): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape });
}

/** The kernel calls of the first graph compile logged (TSORCH_LOGS=graph) while `f` ran. */
function kernelCalls(f: () => void): number {
  const m = /: (\d+) kernel calls/.exec(graphLog(f));
  assert.ok(m, "no graph logged");
  return Number(m[1]);
}

/** The kernel calls of each graph compile logged while the promise of `f` ran (console.error captured, env restored). */
async function kernelCallsAsync(f: () => Promise<unknown>): Promise<number[]> {
  const logged: string[] = [];
  const original = console.error, before = process.env.TSORCH_LOGS;
  process.env.TSORCH_LOGS = "graph";
  console.error = (...a: unknown[]) => { logged.push(a.join(" ")); };
  try {
    await f();
  } finally {
    console.error = original;
    if (before === undefined) delete process.env.TSORCH_LOGS;
    else process.env.TSORCH_LOGS = before;
  }
  const counts = logged.flatMap((l) => [.../: (\d+) kernel calls/g.exec(l) ?? []].slice(1).map(Number));
  assert.ok(counts.length > 0, logged.join("\n"));
  return counts;
}

async function close(got: torch.Tensor[], want: torch.Tensor[], what: string, tol = 1e-5): Promise<void> {
  assert.equal(got.length, want.length, what);
  for (const [i, g] of got.entries()) {
    const d = maxAbsDiff(Array.from(await g.data(), Number), Array.from(await want[i].data(), Number));
    assert.ok(d <= tol, `${what}[${i}]: max |compiled - eager| = ${d}`);
  }
}

const ids = async (t: torch.Tensor) => Array.from(await t.data(), Number);

type QW = { q: torch.Tensor; scales: torch.Tensor; bits: 4 | 8 };
const quantize = (w: torch.Tensor, bits: 4 | 8): QW => ({ ...torch.quantizeBlocks(w, bits), bits });

for (const bits of [8, 4] as const) {
  test(`compile: on cpu, an int${bits} decoder layer's norm + q/k/v, gate/up + SiLU * up and the residual adds fuse, within 1e-5 of eager`, async () => {
    const [H, I] = [64, 96];
    const g1 = rand([H], 1), g2 = rand([H], 2);
    const [wq, wk, wv, wo] = [3, 4, 5, 6].map((s) => quantize(rand([H, H], s), bits));
    const [wg, wu] = [7, 8].map((s) => quantize(rand([I, H], s), bits));
    const wd = quantize(rand([H, I], 9), bits);
    // Attention's projections (the attention itself left out: q + k + v stands in) and a gated MLP.
    const layer = (x: torch.Tensor) => {
      const [q, k, v] = torch.linearQuantizedGroup(torch.rmsNorm(x, g1, 1e-6), [wq, wk, wv].map((w) => ({ ...w, bias: null })));
      const h = torch.add(x, torch.linearQuantized(torch.add(torch.add(q, k), v), wo.q, wo.scales, bits));
      const [gate, up] = torch.linearQuantizedGroup(torch.rmsNorm(h, g2, 1e-6), [wg, wu].map((w) => ({ ...w, bias: null })));
      return torch.add(h, torch.linearQuantized(torch.mul(torch.silu(gate), up), wd.q, wd.scales, bits));
    };
    // One row (the dot kernels, one pool job), 3 rows, 9 rows (the integer GEMM where the host has one).
    for (const M of [1, 3, 9]) {
      torch.compiler.reset();
      const f = torch.compile(layer);
      // rmsNorm + q/k/v + the q + k + v adds (the group's epilogue), o_proj + residual, rmsNorm + gate/up + SiLU * up, down + residual.
      assert.equal(kernelCalls(() => f(rand([M, H], 10))), 4, `${M} rows: kernel calls`);
      for (const s of [11, 12]) await close([f(rand([M, H], s)) as torch.Tensor], [layer(rand([M, H], s))], `int${bits}, ${M} rows, input ${s}`);
    }
  });

  test(`compile: on cpu, the final norm, an int${bits} LM head and its argmax run as one call with eager's ids (ties, NaN)`, async () => {
    const head = (x: torch.Tensor, g: torch.Tensor, q: torch.Tensor, s: torch.Tensor) => torch.argmax(torch.linearQuantized(torch.rmsNorm(x, g, 1e-5), q, s, bits), -1, true);
    const bare = (x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) => torch.argmax(torch.linearQuantized(x, q, s, bits), -1);
    // [rows, N, K]: one row split over many tasks, a few rows, and 12 rows.
    for (const [M, N, K] of [[1, 5000, 64], [3, 100, 32], [12, 77, 32]] as const) {
      torch.compiler.reset();
      const f = torch.compile(head), fb = torch.compile(bare);
      const gain = rand([K], M + 10), w = quantize(rand([N, K], N + 11), bits);
      assert.equal(kernelCalls(() => f(rand([M, K], 1), gain, w.q, w.scales)), 1, `${M}x${N}x${K}: one call`);
      assert.equal(kernelCalls(() => fb(rand([M, K], 1), w.q, w.scales)), 1, `${M}x${N}x${K} without a norm: one call`);
      for (const s of [20, 30]) {
        const x = rand([M, K], s);
        assert.deepEqual(await ids(f(x, gain, w.q, w.scales) as torch.Tensor), await ids(head(x, gain, w.q, w.scales)), `${M}x${N}x${K}, input ${s}`);
        assert.deepEqual(await ids(fb(x, w.q, w.scales) as torch.Tensor), await ids(bare(x, w.q, w.scales)), `${M}x${N}x${K} without a norm, input ${s}`);
      }
    }
    // Ties: weight rows 5, 2037 and 4070 of 4096 equal (in different tasks), with the largest logits: the first wins.
    const [N, K] = [4096, 32];
    const wv = lcgValues(N * K, 40).map((v) => v * 0.1);
    for (const c of [5, 2037, 4070]) wv.set(Array.from({ length: K }, () => 1), c * K);
    const w = quantize(torch.tensor(wv, { shape: [N, K] }), bits);
    const x = torch.tensor(new Float32Array(2 * K).fill(0.5), { shape: [2, K] });
    torch.compiler.reset();
    const fb = torch.compile(bare);
    fb(x, w.q, w.scales);
    assert.deepEqual(await ids(fb(x, w.q, w.scales) as torch.Tensor), [5, 5], "ties: the first maximum");
    // NaN scales in rows 3000 and 3900: their logits are NaN, and the first NaN wins as in eager.
    const scales = Float32Array.from((await w.scales.data()) as Float32Array);
    scales[3000 * (K / 32)] = NaN;
    scales[3900 * (K / 32)] = NaN;
    const sn = torch.tensor(scales, { shape: [...w.scales.shape] });
    assert.deepEqual(await ids(fb(x, w.q, sn) as torch.Tensor), await ids(bare(x, w.q, sn)), "NaN logits: eager's pick");
    assert.deepEqual(await ids(fb(x, w.q, sn) as torch.Tensor), [3000, 3000], "NaN logits: the first NaN");
  });
}

test("compile: on cpu, quantized linears stay unfused where a fusion does not apply (a bias, logits kept, mixed bits)", async () => {
  const [M, N, K] = [1, 64, 64];
  const w8 = quantize(rand([N, K], 1), 8), w4 = quantize(rand([N, K], 2), 4), bias = rand([N], 3), g = rand([K], 4);
  const cases: [string, (x: torch.Tensor) => torch.Tensor | torch.Tensor[], number][] = [
    // A head with a bias: linearQuantized + argmax.
    ["biased head", (x) => torch.argmax(torch.linearQuantized(x, w8.q, w8.scales, 8, bias), -1), 2],
    // The logits returned as well: linearQuantized + argmax.
    ["logits kept", (x) => {
      const logits = torch.linearQuantized(x, w8.q, w8.scales, 8);
      return [logits, torch.argmax(logits, -1)];
    }, 2],
    // An int8 and an int4 weight on one normed input: no group, so the norm stays too.
    ["mixed bits", (x) => {
      const h = torch.rmsNorm(x, g, 1e-6);
      return [torch.linearQuantized(h, w8.q, w8.scales, 8), torch.linearQuantized(h, w4.q, w4.scales, 4)];
    }, 3],
    // A biased linear and a residual add: linearAddQuantized still (the bias added first, as eager).
    ["biased residual", (x) => torch.add(x, torch.linearQuantized(x, w4.q, w4.scales, 4, bias)), 1],
  ];
  for (const [name, f, calls] of cases) {
    torch.compiler.reset();
    const c = torch.compile(f);
    assert.equal(kernelCalls(() => c(rand([M, K], 5))), calls, `${name}: kernel calls`);
    const [got, want] = [c(rand([M, K], 6)), f(rand([M, K], 6))].map((r) => (Array.isArray(r) ? r : [r]));
    await close(got, want, name);
  }
});

test("qwen3 (tiny) int8 / int4 compiled on cpu: decode steps with the float model's kernel calls, eager's greedy ids and logits", async (t) => {
  const dir = path.join(TINY, "qwen3");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const prompt = [3, 17, 101, 250, 7];
  const GREEDY = { doSample: false, eosTokenId: [] as number[] };
  const stepCalls = async (dtype?: "int8" | "int4") => {
    const model = await AutoModelForCausalLM.fromPretrained(dir, dtype ? { dtype } : {});
    torch.compiler.reset();
    return { model, counts: await kernelCallsAsync(() => model.generate(prompt, { ...GREEDY, maxNewTokens: 3, compile: true })) };
  };
  const float = await stepCalls();
  for (const dtype of ["int8", "int4"] as const) {
    const { model, counts } = await stepCalls(dtype);
    // Every fusion of the float model applies: the same kernel calls per graph (prefill and decode steps).
    assert.deepEqual(counts, float.counts, `${dtype}: kernel calls per graph`);
    const eager = await model.generate(prompt, { ...GREEDY, maxNewTokens: 24 });
    assert.deepEqual(await model.generate(prompt, { ...GREEDY, maxNewTokens: 24, compile: true }), eager, `${dtype}: greedy ids`);
    await checkStaticLogits(model, prompt, 1e-5, true);
  }
});

// The op-level cases again on linearQuantized's other paths (its kernels are chosen at load, so in child processes).
if (!process.env.TSORCH_CPU_INT8) {
  test("compile: on cpu, the quantized fusions also match eager on float activations and on the portable integer kernels", async () => {
    // A fresh test runner (not a child of this one: NODE_TEST_CONTEXT unset) printing TAP.
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    for (const int8 of ["off", "portable"]) {
      const { stdout } = await promisify(execFile)(process.execPath, ["--test", "--test-reporter=tap", "--test-name-pattern=^compile: on cpu", fileURLToPath(import.meta.url)],
        { env: { ...env, TSORCH_CPU_INT8: int8 } });
      assert.match(stdout, /# pass 5\n/, `TSORCH_CPU_INT8=${int8}:\n${stdout}`);
      assert.match(stdout, /# fail 0\n/, `TSORCH_CPU_INT8=${int8}:\n${stdout}`);
    }
  });
}

test("the fused cpu exports refuse a quantized weight with bad bits, too few codes or misshapen scales by name", async () => {
  const { native } = await import("../src/devices/cpu/native.js");
  const f32 = (n: number) => new Float32Array(n);
  const codes = (n: number) => new Uint8Array(n);
  const ids = new BigInt64Array(1);
  // x [1, 32], w [2, 32]: int8 codes 64 bytes, scales [2, 1].
  const head = (w: Uint8Array, scales: Float32Array, bits: number) => native().linearArgmax(f32(32), 1, 32, null, 0, 0, 0, w, 0, 2, ids, scales, bits);
  assert.throws(() => head(codes(64), f32(2), 3), /linearArgmax: bits must be 8 or 4/);
  assert.throws(() => head(codes(32), f32(2), 8), /linearArgmax: argument 'w' holds 32 bytes, too few for \[2, 32\] at 8 bits/);
  assert.throws(() => head(codes(64), f32(1), 8), /linearArgmax.*scales/);
  assert.throws(() => native().linearAdd(f32(32), codes(32), 0, null, 0, f32(2), f32(2), 1, 2, 32, f32(1), 4), /linearAdd.*scales/);
  assert.throws(() => native().linearGroup(f32(16), 1, 16, null, 0, 0, 0, 1, codes(16), 0, 2, f32(2), null, 0, 0, null, null, 0, 0, null, null, 0,
    f32(1), null, null, 4), /linearGroup: K = 16 is not a multiple of 32/);
});
