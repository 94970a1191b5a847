/**
 * Every supported architecture on the webgpu device, against Hugging Face transformers' outputs:
 * stories260K (last-position logits within 1e-3, greedy continuations equal) and every tiny
 * fixture whose architecture tsorch supports (full logits within 1e-3, greedy ids of each row and
 * of the left-padded batch equal, dynamic and static caches). Also half-precision weights (against
 * the cpu device; and with half KV caches, greedy ids against transformers'), model.to("webgpu")
 * and `tsorch generate --device webgpu`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { AutoModelForCausalLM, CAUSAL_LM_ARCHITECTURES, type CacheImplementation } from "../src/transformers/index.js";
import { CLI, maxAbsDiff, missing, readJson, STORIES, TINY } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { checkGreedy, checkLogits, fixtureExpected } from "./helpers/fixture_checks.js";

const CACHES: CacheImplementation[] = ["dynamic", "static"];
const TOL = 1e-3;
const run = promisify(execFile);

test("stories260K on webgpu: last-position logits within 1e-3, greedy ids equal", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const expected = readJson(path.join(STORIES, "expected.json"));
  const model = await AutoModelForCausalLM.fromPretrained(STORIES, { device: "webgpu" });
  for (const g of expected.generation) {
    const L = g.input_ids.length;
    const last = (await model.logits([g.input_ids]).narrow(1, L - 1, 1).data()) as Float32Array;
    assert.ok(maxAbsDiff(last, g.last_logits) < TOL, `max diff ${maxAbsDiff(last, g.last_logits)} for '${g.prompt}'`);
    for (const cache of CACHES) {
      const out = await model.generate(g.input_ids as number[], { maxNewTokens: 64, doSample: false, cacheImplementation: cache });
      assert.deepEqual(out.slice(L), g.greedy_new_ids, `${cache}: '${g.prompt}'`);
    }
  }
  const bos = expected.greedy_from_bos;
  const out = await model.generate([1], { maxNewTokens: bos.new_ids.length, doSample: false });
  assert.deepEqual(out.slice(1), bos.new_ids);
});

test("stories260K: model.to('webgpu') after loading on cpu gives the same logits", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const g = readJson(path.join(STORIES, "expected.json")).generation[0];
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  await model.to("webgpu");
  assert.equal(model.device.name, "webgpu");
  const L = g.input_ids.length;
  const last = (await model.logits([g.input_ids]).narrow(1, L - 1, 1).data()) as Float32Array;
  assert.ok(maxAbsDiff(last, g.last_logits) < TOL, `max diff ${maxAbsDiff(last, g.last_logits)}`);
});

test("stories260K with float16 and bfloat16 weights on webgpu: weights stay as stored, logits equal the cpu's", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const g = readJson(path.join(STORIES, "expected.json")).generation[0];
  for (const dtype of ["float16", "bfloat16"]) {
    const cpu = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype });
    const gpu = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype, device: "webgpu" });
    assert.equal(gpu.stateDict().get("model.layers.0.mlp.up_proj.weight")!.dtype, dtype);
    // The shader computes with float32 activations; the cpu's bfloat16 GEMM (AVX512-BF16 hosts)
    // rounds them (test/bf16_gemm.test.ts): the cpu side takes float32 copies (exact) of the weights.
    if (dtype === "bfloat16") for (const [, p] of cpu.namedParameters()) if (p.value.dtype === "bfloat16") p.set(p.value.to("float32"));
    const want = (await cpu.logits([g.input_ids]).data()) as Float32Array;
    const got = (await gpu.logits([g.input_ids]).data()) as Float32Array;
    assert.ok(maxAbsDiff(got, want) < 1e-4, `${dtype}: max diff ${maxAbsDiff(got, want)}`);
  }
});

test("stories260K with float16 and bfloat16 weights and KV caches on webgpu: greedy ids equal transformers' (dynamic and static caches)", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  // webgpu's paged kernels take float32 pools only: a half dynamic cache writes and attends through
  // the plain ops, the static cache allocates float32 pools (restrictPoolDtypes).
  for (const dtype of ["float16", "bfloat16"]) {
    const gpu = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype, device: "webgpu" });
    for (const g of readJson(path.join(STORIES, "expected.json")).generation) {
      for (const cacheImplementation of CACHES) {
        const out = await gpu.generate(g.input_ids, { maxNewTokens: 16, eosTokenId: [], doSample: false, cacheImplementation });
        assert.deepEqual(out.slice(g.input_ids.length), g.greedy_new_ids.slice(0, 16), `${dtype}, ${cacheImplementation} cache`);
      }
    }
  }
});

test("tsorch generate --device webgpu matches transformers' greedy ids", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const g = readJson(path.join(STORIES, "expected.json")).generation[0];
  const args = [CLI, "generate", "--model", STORIES, "--device", "webgpu", "--input-ids", g.input_ids.join(","), "--max-new-tokens", "16", "--output", "json"];
  const { stdout } = await run(process.execPath, args, { maxBuffer: 1 << 24 });
  assert.deepEqual(JSON.parse(stdout).new_token_ids, g.greedy_new_ids.slice(0, 16));
});

/** Tiny fixtures whose architecture is registered (architectures are added over time). */
function supportedFixtures(): string[] {
  if (!existsSync(TINY)) return [];
  return readdirSync(TINY).filter((name) => {
    if (!existsSync(path.join(TINY, name, "config.json"))) return false; // notes beside the fixture folders
    const config = readJson(path.join(TINY, name, "config.json"));
    return (config.architectures as string[] | undefined)?.some((a) => a in CAUSAL_LM_ARCHITECTURES) ?? false;
  });
}

test("tiny fixtures: at least llama and mistral are covered", (t) => {
  const skip = missing(TINY);
  if (skip) return t.skip(skip);
  const names = supportedFixtures();
  assert.ok(names.includes("llama") && names.includes("mistral"), `covered: ${names.join(", ")}`);
});

for (const arch of supportedFixtures()) {
  const dir = path.join(TINY, arch);

  test(`${arch} (tiny) on webgpu: logits within 1e-3, greedy ids equal (single, left-padded; dynamic, static)`, async (t) => {
    if (!(await webgpuOrSkip(t))) return;
    const model = await AutoModelForCausalLM.fromPretrained(dir, { device: "webgpu" });
    const e = fixtureExpected(arch);
    await checkLogits(model, e, TOL);
    await checkGreedy(model, e);
  });
}
