/**
 * Checks of the graph-ready static steps of compiled generation (run op by op with compile
 * "eager", or compiled): greedy ids against a fixture's transformers outputs, and step logits
 * against eager forwards on the dynamic KV cache.
 */
import assert from "node:assert/strict";
import { KVCache } from "../../src/transformers/cache_utils.js";
import { compiledSteps, eagerSteps, StaticSteps } from "../../src/transformers/generation/static_steps.js";
import type { PreTrainedModel } from "../../src/transformers/index.js";
import { fixtureExpected } from "./fixture_checks.js";
import { maxAbsDiff } from "./shared.js";

/** Greedy ids with `compile` equal transformers' (the fixture's): each row alone and the left-padded batch. */
export async function checkStaticGreedy(model: PreTrainedModel, arch: string, compile: true | "eager"): Promise<void> {
  const e = fixtureExpected(arch);
  const opts = { maxNewTokens: e.greedy.max_new_tokens, doSample: false, eosTokenId: [] as number[] };
  for (let b = 0; b < e.input_ids.length; b++) {
    const out = await model.generate(e.input_ids[b], { ...opts, compile });
    assert.deepEqual(out.slice(e.input_ids[b].length), e.greedy.single[b], `${arch} row ${b}`);
  }
  const lp = e.greedy_left_padded;
  const out = await model.generate(lp.input_ids, { ...opts, attentionMask: lp.attention_mask, compile });
  assert.deepEqual(out.map((r) => r.slice(lp.input_ids[0].length)), lp.new_tokens, `${arch} left-padded batch`);
}

/** Prefill and 6 decode steps of the static path against eager forwards on a dynamic KV cache, within `tol`. */
export async function checkStaticLogits(model: PreTrainedModel, prompt: number[], tol: number, compile: true | "eager"): Promise<void> {
  const steps = new StaticSteps(model, [prompt], 8, model.dtype, compile === true ? compiledSteps : eagerSteps);
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

