/**
 * Weight-only block quantization (--dtype int8 / int4, llama.cpp's q8_0 / q4_0 with float32
 * scales): round-trip error bounds, every cpu kernel tier this host can run, and the accuracy on
 * stories260K against transformers' float32 outputs (expected.json).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { native } from "../src/devices/cpu/native.js";
import { Linear } from "../src/nn/layers.js";
import { quantizeBlocks } from "../src/tensor/ops.js";
import { fromBytes } from "../src/tensor/creation.js";
import { encode } from "../src/tensor/host.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { CLI, maxAbsDiff, missing, readJson, STORIES } from "./helpers/shared.js";
import "../src/index.js";

const run = promisify(execFile);

/** Dequantize the bytes quantizeBlocks wrote (float64, host side). */
function dequantize(bits: 4 | 8, q: Uint8Array, scales: Float32Array, N: number, K: number): number[] {
  const out: number[] = [];
  const row = bits === 8 ? K : K / 2;
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) {
    const g = k >> 5, j = k & 31;
    const code = bits === 8 ? (q[n * row + k] << 24) >> 24 : (j < 16 ? q[n * row + g * 16 + j] & 15 : q[n * row + g * 16 + j - 16] >> 4) - 8;
    out.push(code * scales[n * (K / 32) + g]);
  }
  return out;
}

test("quantize -> dequantize: int8 error <= d/2, int4 error <= d, d = max|x| / 127 (int8), max-magnitude / -8 (int4)", async () => {
  const N = 16, K = 256;
  let seed = 3;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
  const w = Array.from({ length: N * K }, (_, i) => Math.fround(rand() * (i % 97 === 0 ? 4 : 0.05)));
  const t = fromBytes(encode(w, "float32"), "float32", [N, K], "cpu");
  for (const bits of [8, 4] as const) {
    const { q, scales } = quantizeBlocks(t, bits);
    const bytes = new Uint8Array(((await q.data()) as Int32Array).buffer.slice(0));
    const s = (await scales.data()) as Float32Array;
    const back = dequantize(bits, bytes, s, N, K);
    for (let b = 0; b < (N * K) / 32; b++) {
      const block = w.slice(b * 32, b * 32 + 32);
      const big = block.reduce((m, x) => (Math.abs(x) > Math.abs(m) ? x : m), 0);
      assert.equal(s[b], Math.fround(bits === 8 ? Math.abs(big) / 127 : big / -8), `block ${b} scale`);
      const bound = (bits === 8 ? 0.5 : 1) * Math.abs(s[b]) * (1 + 1e-6);
      for (let j = 0; j < 32; j++) assert.ok(Math.abs(back[b * 32 + j] - block[j]) <= bound, `int${bits} block ${b}[${j}]: ${back[b * 32 + j]} vs ${block[j]}`);
    }
  }
});

test("quantized linear kernels: every integer path and tier this host supports passes the conformance cases", async () => {
  const features = native().cpuFeatures();
  const has = (re: RegExp) => re.test(features);
  const avx512 = has(/\bavx512f\b.*\bavx512bw\b.*\bavx512vl\b/), avx2 = has(/\bavx2\b.*\bfma\b.*\bf16c\b/);
  // [GEMM tier, integer path (TSORCH_CPU_INT8; "off": float activations), can this host run it]
  const paths: [string, string, boolean][] = [
    ["avx512", "avx512-vnni", avx512 && has(/\bavx512vnni\b/)],
    ["avx2", "avx-vnni", avx2 && has(/\bavxvnni\b/)],
    ["avx2", "avx2", avx2],
    ["portable", "portable", true],
    ["avx512", "off", avx512],
    ["avx2", "off", avx2],
    ["portable", "off", true],
  ];
  const notRun = paths.filter(([, , can]) => !can).map(([tier, int8]) => `${tier}/int8=${int8}`);
  if (notRun.length) console.log(`quantized linear: paths not exercised on this host (${features}): ${notRun.join(", ")}`);
  for (const [tier, int8] of paths.filter(([, , can]) => can)) {
    const env = { ...process.env, TSORCH_CPU_ISA: tier, TSORCH_CPU_INT8: int8 };
    const nativeJs = pathToFileURL(path.join(path.dirname(CLI), "../devices/cpu/native.js")).href;
    const { stdout: f } = await run(process.execPath, ["-e", `import(${JSON.stringify(nativeJs)}).then((m) => console.log(m.native().cpuFeatures()))`], { env });
    assert.match(f, new RegExp(`kernels=${tier} int8=${int8}\\b`), `${tier}/${int8} was not selected: ${f}`);
    for (const op of ["quantizeBlocks", "linearQuantized"]) {
      const { stdout } = await run(process.execPath, [CLI, "conformance", "--op", op], { env });
      assert.match(stdout, /pass rate: 100\.0%/, `${tier}/int8=${int8} ${op}:\n${stdout}`);
    }
  }
});

test("stories260K --dtype int8: greedy equals float32's (transformers) for both prompts; int4: stated bounds", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const expected = readJson(path.join(STORIES, "expected.json"));
  // Measured (this host, activations quantized to int8 blocks as llama.cpp does, every integer path
  // alike): int8 max |logit diff| 0.31 and 0.19 (0.16 with float32 activations), greedy 64/64 equal;
  // int4 max diff 2.9 and 2.5, greedy equal for the first 23 and 4 new tokens. A 64-wide model is
  // far more sensitive to 4-bit weights than real ones; the bounds below leave ~1.5x headroom.
  const bounds = { int8: { logits: 0.45, prefix: 64 }, int4: { logits: 4.5, prefix: 3 } };
  for (const dtype of ["int8", "int4"] as const) {
    const model = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype });
    const linears = [...model.namedModules()].filter(([, m]) => m instanceof Linear) as [string, Linear][];
    // down_proj (input 172, not a multiple of 32) stays float; every other Linear is quantized.
    for (const [name, m] of linears) assert.equal(m.quantized !== null, !name.endsWith("down_proj"), name);
    for (const g of expected.generation) {
      const L = g.input_ids.length;
      const last = (await model.logits([g.input_ids]).narrow(1, L - 1, 1).data()) as Float32Array;
      const diff = maxAbsDiff(last, g.last_logits);
      assert.ok(diff < bounds[dtype].logits, `${dtype} '${g.prompt}': max logit diff ${diff}`);
      const out = (await model.generate(g.input_ids as number[], { maxNewTokens: 64, doSample: false })).slice(L);
      const n = bounds[dtype].prefix;
      assert.deepEqual(out.slice(0, n), g.greedy_new_ids.slice(0, n), `${dtype} '${g.prompt}' greedy`);
    }
  }
});

test("tsorch generate --dtype int8 equals float32's greedy continuation; an unknown dtype is an error naming it", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const g = readJson(path.join(STORIES, "expected.json")).generation[0];
  const { stdout } = await run(process.execPath, [CLI, "generate", "--model", STORIES, "--dtype", "int8", "--input-ids", g.input_ids.join(","), "--max-new-tokens", "16", "--output", "json"]);
  assert.deepEqual(JSON.parse(stdout).new_token_ids, g.greedy_new_ids.slice(0, 16));
  await assert.rejects(AutoModelForCausalLM.fromPretrained(STORIES, { dtype: "int3" }), /unknown dtype 'int3'/);
});
