/**
 * Compiled generation on cpu with a half-precision KV cache (the static cache's pools hold
 * bfloat16 there, written and read by the paged kernels without float32 copies) and with the KV
 * buffers reused across generations: greedy ids and step logits equal eager generation's on the
 * dynamic cache of the same dtype.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { compiler } from "../src/compile/index.js";
import { KVCache } from "../src/transformers/cache_utils.js";
import { compiledSteps, StaticSteps } from "../src/transformers/generation/static_steps.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { maxAbsDiff, missing, STORIES } from "./helpers/shared.js";

const GREEDY = { doSample: false, eosTokenId: [] as number[], cacheDtype: "bfloat16" as const };

test("stories260K compiled with a bfloat16 KV cache: eager's greedy ids, also on reused KV buffers", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const long = [1, 403, 407, 261, 378, 290, 333], short = [1, 403];
  compiler.reset();
  // The long prompt leaves keys and values at every position the short one later writes: a step
  // that read a position of the earlier generation would change the ids.
  for (const prompt of [long, short, long]) {
    const eager = await model.generate(prompt, { ...GREEDY, maxNewTokens: 40 });
    assert.deepEqual(await model.generate(prompt, { ...GREEDY, maxNewTokens: 40, compile: true }), eager, `prompt of ${prompt.length}`);
  }
  assert.equal(compiler.stats().compiles, 2);
});

test("stories260K static steps with a bfloat16 KV cache: step logits within 1e-5 of eager's", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const prompt = [1, 403, 407, 261, 378];
  const steps = new StaticSteps(model, [prompt], 8, "bfloat16", compiledSteps);
  const cache = new KVCache(model.numLayers, "dynamic", prompt.length + 8, "bfloat16");
  const eager = (ids: number[], past: number) => model.forward({
    inputIds: model.idsTensor([ids]), positionIds: [ids.map((_, i) => past + i)], attentionMask: null, cache, logitsToKeep: 1,
  });
  let logits = steps.prefill(), want = eager(prompt, 0);
  for (let step = 0; step <= 6; step++) {
    const got = (await logits.data()) as Float32Array;
    assert.ok(maxAbsDiff(got, (await want.data()) as Float32Array) < 1e-5, `step ${step}`);
    let best = 0;
    for (let i = 1; i < got.length; i++) if (got[i] > got[best]) best = i;
    logits = steps.decode([best], step);
    want = eager([best], prompt.length + step);
  }
  steps.release();
});
