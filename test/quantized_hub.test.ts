/**
 * Pre-quantized Hub checkpoints loaded as they are: GPTQ (4-bit symmetric, 4-bit with act-order
 * g_idx and zero points, 8-bit), AWQ (4-bit gemm) and FP8 block-scaled, on stories260K and the tiny
 * llama / qwen3 fixtures. Each checkpoint is packed here (test/helpers/hub_quant_pack.ts) and its
 * packed tensors must be byte-identical to those of the Python packer
 * (test/data/quantized_hub/make_reference.py); the logits must then match transformers run on the
 * dequantized weights (reference.json), on cpu within 1e-4 and on webgpu within 1e-3 of cpu.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import * as path from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { native } from "../src/devices/cpu/native.js";
import { Linear } from "../src/nn/layers.js";
import { AutoModelForCausalLM, type PreTrainedModel } from "../src/transformers/index.js";
import { hubQuantization } from "../src/transformers/quantization_config.js";
import { writeQuantizedCheckpoint, type QuantConfig } from "./helpers/hub_quant_pack.js";
import { CLI, maxAbsDiff, missing, readJson, ROOT, STORIES, TINY } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import "../src/index.js";
import { tempDir } from "./helpers/temp_dir.js";

interface Variant {
  quantization_config: QuantConfig;
  quantized: string[];
  tensor_sha256: Record<string, string>;
  prompts: { input_ids: number[]; last_logits: number[]; greedy: number[] }[];
}
const REF = readJson<{ new_tokens: number; variants: Record<string, Variant> }>(path.join(ROOT, "test/data/quantized_hub/reference.json"));
const SOURCES: Record<string, string> = { stories260K: STORIES, llama: path.join(TINY, "llama"), qwen3: path.join(TINY, "qwen3") };
const TMP = tempDir("tsorch-quant-hub-");
after(() => rmSync(TMP, { recursive: true, force: true }));

/** The checkpoint of `key` ("model/variant") written under TMP (once), or a reason to skip. */
const written = new Map<string, string>();
function checkpoint(key: string): { dir?: string; skip?: string } {
  const src = SOURCES[key.split("/")[0]];
  const skip = missing(src);
  if (skip) return { skip };
  let dir = written.get(key);
  if (!dir) {
    dir = path.join(TMP, key.replace("/", "-"));
    const hashes = writeQuantizedCheckpoint(src, dir, REF.variants[key].quantization_config);
    assert.deepEqual(hashes, REF.variants[key].tensor_sha256, `${key}: the TypeScript packer's tensors differ from the Python packer's`);
    written.set(key, dir);
  }
  return { dir };
}

async function lastLogits(model: PreTrainedModel, ids: number[]): Promise<Float32Array> {
  const all = (await model.logits([ids]).data()) as Float32Array;
  const V = all.length / ids.length;
  return all.slice((ids.length - 1) * V);
}

for (const [key, v] of Object.entries(REF.variants)) {
  test(`${key}: packed as the Python tools lay it out; cpu logits within 1e-4 of transformers on the dequantized weights, greedy equal`, async (t) => {
    const { dir, skip } = checkpoint(key);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(dir!);
    const hub = [...model.namedModules()].filter(([, m]) => m instanceof Linear && m.hub).map(([n]) => n);
    assert.deepEqual(hub.sort(), [...v.quantized].sort(), "the Linears running the Hub format are those the checkpoint quantized");
    for (const p of v.prompts) {
      assert.ok(maxAbsDiff(await lastLogits(model, p.input_ids), p.last_logits) < 1e-4, `${key}: last-position logits`);
      const out = (await model.generate(p.input_ids, { maxNewTokens: REF.new_tokens, doSample: false })).slice(p.input_ids.length);
      assert.deepEqual(out, p.greedy, `${key}: greedy continuation of [${p.input_ids}]`);
    }
  });
}

test("webgpu: every format's logits within 1e-3 of cpu's (dequantized in the shader)", async (t) => {
  const device = await webgpuOrSkip(t);
  if (!device) return;
  for (const key of ["stories260K/gptq4", "stories260K/gptq4-actorder", "stories260K/gptq8", "stories260K/awq4", "stories260K/fp8", "qwen3/fp8", "qwen3/awq4"]) {
    const { dir, skip } = checkpoint(key);
    if (skip) return t.skip(skip);
    const gpu = await AutoModelForCausalLM.fromPretrained(dir!, { device: "webgpu" });
    const cpu = await AutoModelForCausalLM.fromPretrained(dir!);
    for (const p of REF.variants[key].prompts) {
      const err = maxAbsDiff(await lastLogits(gpu, p.input_ids), await lastLogits(cpu, p.input_ids));
      assert.ok(err < 1e-3, `${key}: webgpu vs cpu max |logit diff| ${err}`);
    }
  }
});

test("quantization_config: unsupported methods, bits, versions and formats are refused naming what is supported", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ quant_method: "bitsandbytes" }, /quant_method "bitsandbytes" is not supported \(supported: gptq .*awq .*fp8 .*mxfp4/],
    [{ quant_method: "gptq", bits: 3, group_size: 128 }, /gptq bits 3 is not supported/],
    [{ quant_method: "gptq", bits: 4, checkpoint_format: "marlin" }, /gptq checkpoint_format "marlin" is not supported/],
    [{ quant_method: "awq", bits: 4, version: "gemv" }, /awq version "gemv" is not supported/],
    [{ quant_method: "awq", bits: 8, version: "gemm" }, /awq bits 8 is not supported/],
    [{ quant_method: "fp8", activation_scheme: "dynamic" }, /fp8 weight_block_size undefined \(per-tensor FP8\) is not supported/],
    [{ quant_method: "fp8", weight_block_size: [128, 128], activation_scheme: "static" }, /fp8 activation_scheme "static" is not supported/],
  ];
  for (const [q, re] of cases) assert.throws(() => hubQuantization({ quantization_config: q }), re);
  assert.deepEqual(hubQuantization({ quantization_config: { quant_method: "gptq", bits: 4, group_size: 32, desc_act: true } }),
    { method: "gptq", bits: 4, groupSize: 32, zeroOffset: 1 });
  assert.deepEqual(hubQuantization({ quantization_config: { quant_method: "gptq", bits: 8, group_size: -1, checkpoint_format: "gptq_v2" } }),
    { method: "gptq", bits: 8, groupSize: -1, zeroOffset: 0 });
  assert.equal(hubQuantization({}), null);
});

test("--dtype int8 on a GPTQ checkpoint is refused: it is already quantized", async (t) => {
  const { dir, skip } = checkpoint("stories260K/gptq4");
  if (skip) return t.skip(skip);
  await assert.rejects(AutoModelForCausalLM.fromPretrained(dir!, { dtype: "int8" }), /dtype 'int8' quantizes float checkpoints; .* is already quantized \(gptq\)/);
});

test("webgpu --dtype int8 / int4 (q8_0 / q4_0, quantized on cpu, decoded in the shader): logits within 1e-3 of cpu's", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const ids = readJson(path.join(STORIES, "expected.json")).generation[0].input_ids as number[];
  for (const dtype of ["int8", "int4"]) {
    const gpu = await AutoModelForCausalLM.fromPretrained(STORIES, { device: "webgpu", dtype });
    const cpu = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype });
    const linears = [...gpu.namedModules()].filter(([, m]) => m instanceof Linear) as [string, Linear][];
    for (const [name, m] of linears) assert.equal(m.quantized?.q.device.type, name.endsWith("down_proj") ? undefined : "webgpu", name);
    const err = maxAbsDiff(await lastLogits(gpu, ids), await lastLogits(cpu, ids));
    assert.ok(err < 1e-3, `${dtype}: webgpu vs cpu max |logit diff| ${err}`);
  }
});

test("cpu kernels (quant_hub_*.cc): every tier this host supports passes the GPTQ / AWQ / FP8 conformance cases", async () => {
  const run = promisify(execFile);
  const features = native().cpuFeatures();
  const tiers = ["portable", "avx2", "avx512"];
  const can = (tier: string) => tier === "portable" || (tier === "avx2" ? /\bavx2\b.*\bfma\b.*\bf16c\b/.test(features) : /\bavx512f\b.*\bavx512bw\b.*\bavx512vl\b/.test(features));
  const notRun = tiers.filter((tier) => !can(tier));
  if (notRun.length) console.log(`Hub quantized linears: tiers not exercised on this host (${features}): ${notRun.join(", ")}`);
  for (const tier of tiers.filter(can)) {
    const env = { ...process.env, TSORCH_CPU_ISA: tier };
    const probe = `import(${JSON.stringify(path.join(ROOT, "dist/src/devices/cpu/native.js"))}).then((m) => console.log(m.native().cpuFeatures()))`;
    const { stdout: picked } = await run(process.execPath, ["-e", probe], { env });
    assert.match(picked, new RegExp(`kernels=${tier}(\\s|$)`), `TSORCH_CPU_ISA=${tier} did not select the ${tier} kernels`);
    // "linear" selects linear, linearQuantized, linearPackedInt and linearFp8Block.
    const { stdout } = await run(process.execPath, [CLI, "conformance", "--op", "linear"], { env, cwd: TMP });
    assert.match(stdout, /linearPackedInt\s+(\d+)\s+\1\s/, `${tier}:\n${stdout}`);
    assert.match(stdout, /linearFp8Block\s+(\d+)\s+\1\s/, `${tier}:\n${stdout}`);
    assert.match(stdout, /pass rate: 100\.0%/, `${tier}:\n${stdout}`);
  }
});
