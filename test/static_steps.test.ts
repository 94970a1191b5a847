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
import { AutoModelForCausalLM, type PreTrainedModel } from "../src/transformers/index.js";
import { eagerSteps, promptBucket, StaticSteps, type StepWrapper } from "../src/transformers/generation/static_steps.js";
import { KVCache } from "../src/transformers/cache_utils.js";
import { fixtureExpected } from "./helpers/fixture_checks.js";
import { maxAbsDiff, missing, STORIES, TINY } from "./helpers/shared.js";

/** Families whose models have a static step (DecoderLM with rotary attention over a KV cache). */
const STATIC_FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "smollm3", "mixtral", "qwen3_moe", "glm4_moe"];

/** Greedy ids with compile "eager" equal transformers' (the fixture's) and eager generation's. */
async function checkStaticGreedy(model: PreTrainedModel, arch: string): Promise<void> {
  const e = fixtureExpected(arch);
  const opts = { maxNewTokens: e.greedy.max_new_tokens, doSample: false, eosTokenId: [] as number[] };
  for (let b = 0; b < e.input_ids.length; b++) {
    const out = await model.generate(e.input_ids[b], { ...opts, compile: "eager" });
    assert.deepEqual(out.slice(e.input_ids[b].length), e.greedy.single[b], `${arch} row ${b}`);
  }
  const lp = e.greedy_left_padded;
  const out = await model.generate(lp.input_ids, { ...opts, attentionMask: lp.attention_mask, compile: "eager" });
  assert.deepEqual(out.map((r) => r.slice(lp.input_ids[0].length)), lp.new_tokens, `${arch} left-padded batch`);
}

/** Prefill and 6 decode steps of the static path against eager forwards on a dynamic KV cache, within `tol`. */
export async function checkStaticLogits(model: PreTrainedModel, prompt: number[], tol: number, wrap: StepWrapper = eagerSteps): Promise<void> {
  const steps = new StaticSteps(model, [prompt], 8, model.dtype, wrap);
  const cache = new KVCache(model.numLayers, "dynamic", prompt.length + 8, model.dtype);
  const eager = (ids: number[], past: number) => model.forward({
    inputIds: model.idsTensor([ids]), positionIds: [ids.map((_, i) => past + i)], attentionMask: null, cache, logitsToKeep: 1,
  });
  let logits = steps.prefill(), want = eager(prompt, 0);
  for (let step = 0; step <= 6; step++) {
    const got = (await logits.data()) as Float32Array;
    const diff = maxAbsDiff(got, (await want.data()) as Float32Array);
    assert.ok(diff < tol, `step ${step}: max abs diff ${diff}`);
    let best = 0;
    for (let i = 1; i < got.length; i++) if (got[i] > got[best]) best = i;
    logits = steps.decode([best], step);
    want = eager([best], prompt.length + step);
  }
}

for (const arch of STATIC_FAMILIES) {
  test(`${arch} (tiny): static steps give transformers' greedy ids (single, left-padded) and logits within 1e-5`, async (t) => {
    const dir = path.join(TINY, arch);
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    assert.equal(model.staticStepUnsupported(), null);
    await checkStaticGreedy(model, arch);
    await checkStaticLogits(model, fixtureExpected(arch).input_ids[0], 1e-5);
  });
}

test("stories260K: static steps give eager's 64 greedy ids and logits within 1e-5", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const prompt = [1, 403, 407, 261, 378];
  const opts = { maxNewTokens: 64, doSample: false, eosTokenId: [] as number[] };
  assert.deepEqual(await model.generate(prompt, { ...opts, compile: "eager" }), await model.generate(prompt, opts));
  await checkStaticLogits(model, prompt, 1e-5);
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
