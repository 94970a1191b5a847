/**
 * Llama and Mistral against Hugging Face transformers' outputs: stories260K (a trained checkpoint)
 * and the tiny random llama/mistral fixtures. Tolerance: 1e-4 absolute on float32 logits.
 */
import assert from "node:assert/strict";
import { copyFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { AutoModelForCausalLM, type CacheImplementation } from "../src/transformers/index.js";
import { writeSafetensors } from "./helpers/mock_hub.js";
import { maxAbsDiff, missing, readJson, STORIES } from "./helpers/shared.js";
import { testTinyFixture } from "./helpers/fixture_checks.js";
import { tempDir } from "./helpers/temp_dir.js";

const CACHES: CacheImplementation[] = ["dynamic", "static"];

test("stories260K: last-position logits match transformers within 1e-4", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const expected = readJson(path.join(STORIES, "expected.json"));
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  for (const g of expected.generation) {
    const logits = model.logits([g.input_ids]);
    const L = g.input_ids.length;
    const last = (await logits.narrow(1, L - 1, 1).data()) as Float32Array;
    assert.ok(maxAbsDiff(last, g.last_logits) < 1e-4, `max diff ${maxAbsDiff(last, g.last_logits)} for '${g.prompt}'`);
  }
});

test("stories260K: greedy continuations equal transformers' (64 tokens, and 200 from BOS)", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const expected = readJson(path.join(STORIES, "expected.json"));
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  for (const cache of CACHES) {
    for (const g of expected.generation) {
      const out = await model.generate(g.input_ids as number[], { maxNewTokens: 64, doSample: false, cacheImplementation: cache });
      assert.deepEqual(out.slice(g.input_ids.length), g.greedy_new_ids, `${cache}: '${g.prompt}'`);
    }
  }
  const bos = expected.greedy_from_bos;
  const out = await model.generate([1], { maxNewTokens: bos.new_ids.length, doSample: false });
  assert.deepEqual(out.slice(1), bos.new_ids);
});

for (const arch of ["llama", "mistral"]) testTinyFixture(arch);

test("stories260K in bfloat16 and float16: weights stay as stored, logits close to float32, greedy equal", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const expected = readJson(path.join(STORIES, "expected.json"));
  // A bf16 checkpoint on disk, as Hub models ship: loads as bf16 with dtype "auto" (no float32 copy).
  const dir = tempDir("tsorch-bf16-");
  for (const f of ["config.json", "generation_config.json"]) copyFileSync(path.join(STORIES, f), path.join(dir, f));
  const f32 = await AutoModelForCausalLM.fromPretrained(STORIES);
  const tensors = await Promise.all([...f32.stateDict()].filter(([n]) => n !== "lm_head.weight").map(async ([name, w]) => {
    const bf = w.to("bfloat16");
    return { name, dtype: "BF16", shape: [...bf.shape], bytes: new Uint8Array((bf.storage.handle as Uint8Array).subarray(bf.byteOffset, bf.byteOffset + bf.numel * 2)) };
  }));
  writeSafetensors(path.join(dir, "model.safetensors"), tensors);
  // Tolerances (max abs on last-position logits vs transformers' float32): bf16 weights 0.15,
  // f16 weights 0.02; activations are float32 in both cases.
  for (const [model, tol] of [[await AutoModelForCausalLM.fromPretrained(dir), 0.15], [await AutoModelForCausalLM.fromPretrained(STORIES, { dtype: "float16" }), 0.02]] as const) {
    const dtype = model.stateDict().get("model.layers.0.mlp.up_proj.weight")!.dtype;
    for (const g of expected.generation) {
      const L = g.input_ids.length;
      const last = (await model.logits([g.input_ids]).narrow(1, L - 1, 1).data()) as Float32Array;
      assert.ok(maxAbsDiff(last, g.last_logits) < tol, `${dtype}: max diff ${maxAbsDiff(last, g.last_logits)}`);
      const out = await model.generate(g.input_ids as number[], { maxNewTokens: 64 });
      assert.deepEqual(out.slice(L), g.greedy_new_ids, `${dtype} greedy`);
    }
  }
  assert.equal((await AutoModelForCausalLM.fromPretrained(dir)).stateDict().get("model.embed_tokens.weight")!.dtype, "bfloat16");
});
