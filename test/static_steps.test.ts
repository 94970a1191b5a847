/**
 * The graph-ready static steps of compiled generation (generation/static_steps.ts), run op by op
 * (compile: "eager"): greedy ids equal those of eager generation with the dynamic cache and
 * transformers' for every family fixture that has such a step (each row alone and the left-padded
 * batch), prefill and decode logits within 1e-5 of eager forwards on the dynamic cache, and models without a
 * static step fall back to eager generation.
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { promptBucket } from "../src/transformers/generation/static_steps.js";
import { fixtureExpected } from "./helpers/fixture_checks.js";
import { missing, STORIES, TINY } from "./helpers/shared.js";
import { checkStaticGreedy, checkStaticLogits } from "./helpers/static_checks.js";

/** Families whose models have a static step (DecoderLM with rotary attention over a KV cache). */
const STATIC_FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "smollm3", "mixtral", "qwen3_moe", "glm4_moe"];

for (const arch of STATIC_FAMILIES) {
  test(`${arch} (tiny): static steps give transformers' greedy ids (single, left-padded) and logits within 1e-5`, async (t) => {
    const dir = path.join(TINY, arch);
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    assert.equal(model.staticStepUnsupported(), null);
    await checkStaticGreedy(model, arch, "eager");
    await checkStaticLogits(model, fixtureExpected(arch).input_ids[0], 1e-5, "eager");
  });
}

test("stories260K: static steps give eager's 64 greedy ids and logits within 1e-5", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const prompt = [1, 403, 407, 261, 378];
  const opts = { maxNewTokens: 64, doSample: false, eosTokenId: [] as number[] };
  assert.deepEqual(await model.generate(prompt, { ...opts, compile: "eager" }), await model.generate(prompt, opts));
  await checkStaticLogits(model, prompt, 1e-5, "eager");
});

test("models without a static step generate eagerly with compile set", async (t) => {
  for (const arch of ["gpt2", "gpt_oss", "deepseek_v3", "qwen3_5_text"]) {
    const dir = path.join(TINY, arch);
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    assert.match(model.staticStepUnsupported() ?? "", /attention|static|sinks/, arch);
    const e = fixtureExpected(arch);
    const out = await model.generate(e.input_ids[0], { maxNewTokens: e.greedy.max_new_tokens, doSample: false, eosTokenId: [], compile: "eager" });
    assert.deepEqual(out.slice(e.input_ids[0].length), e.greedy.single[0], arch);
  }
});

test("prompt buckets are powers of two of at least 8", () => {
  assert.deepEqual([1, 7, 8, 9, 16, 17, 100].map(promptBucket), [8, 8, 8, 16, 16, 32, 128]);
});

test("generate rejects a bad compile option by name", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  await assert.rejects(model.generate([1], { compile: "fast" as unknown as boolean }), /compile.*must be true, false or 'eager'/);
});
