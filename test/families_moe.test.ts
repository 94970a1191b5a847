/**
 * Mixture-of-experts families against Hugging Face transformers' outputs: the tiny random mixtral
 * and qwen3_moe fixtures (full logits within 1e-4 absolute; greedy ids of single rows and of a
 * left-padded batch, with dynamic and static caches), and the CLI on one of them.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import * as T from "../src/index.js";
import { AutoModelForCausalLM, type CacheImplementation } from "../src/transformers/index.js";
import { CLI, maxAbsDiff, missing, readJson, TINY } from "./helpers/shared.js";

const CACHES: CacheImplementation[] = ["dynamic", "static"];

test("gatherLinear: each row through its own expert's weight, unused experts skipped, bad index throws", async () => {
  const w = [0, 1, 2].map((e) => T.add(T.arange(0, 6, 1, { dtype: "float32" }).view(2, 3), e * 10)); // expert 1 unused
  const x = T.tensor([[[1, 2, 3], [0, 1, 0]], [[2, 0, 1], [1, 1, 1]]]);
  const idx = T.tensor([[2, 0], [2, 2]], { dtype: "int64" });
  const out = T.gatherLinear(x, w, idx);
  assert.deepEqual(out.shape, [2, 2, 2]);
  const want = await Promise.all([[0, 0, 2], [0, 1, 0], [1, 0, 2], [1, 1, 2]].map(async ([b, r, e]) => Array.from((await T.linear(x.select(0, b).select(0, r), w[e]).data()) as Float32Array)));
  assert.deepEqual(Array.from((await out.data()) as Float32Array), want.flat());
  assert.throws(() => T.gatherLinear(x, w, T.tensor([[0, 3], [1, 1]], { dtype: "int64" })), /expert index 3 is out of range for 3 weights/);
  assert.throws(() => T.gatherLinear(x, w, T.tensor([0, 1], { dtype: "int64" })), /leading shape/);
});

for (const arch of ["mixtral", "qwen3_moe"]) {
  const dir = path.join(TINY, arch);

  test(`${arch} (tiny): full logits within 1e-4`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const e = readJson(path.join(dir, "expected.json"));
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    const logits = model.logits(e.input_ids);
    assert.deepEqual(logits.shape, [2, 7, 512]);
    const diff = maxAbsDiff((await logits.data()) as Float32Array, e.logits.flat(2));
    assert.ok(diff < 1e-4, `max abs diff ${diff}`);
  });

  test(`${arch} (tiny): single and left-padded batch greedy ids, dynamic and static cache`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const e = readJson(path.join(dir, "expected.json"));
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    const n = e.greedy.max_new_tokens;
    for (const cache of CACHES) {
      for (let b = 0; b < e.input_ids.length; b++) {
        const out = await model.generate(e.input_ids[b] as number[], { maxNewTokens: n, doSample: false, cacheImplementation: cache, eosTokenId: [] });
        assert.deepEqual(out.slice(e.input_ids[b].length), e.greedy.single[b], `${cache} row ${b}`);
      }
      const lp = e.greedy_left_padded;
      const out = await model.generate(lp.input_ids as number[][], { maxNewTokens: n, doSample: false, attentionMask: lp.attention_mask, cacheImplementation: cache, eosTokenId: [] });
      assert.deepEqual(out.map((r) => r.slice(lp.input_ids[0].length)), lp.new_tokens, `${cache} left-padded batch`);
    }
  });
}

test("qwen3_moe (tiny): tsorch forward and generate --output json match transformers", async (t) => {
  const dir = path.join(TINY, "qwen3_moe");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const e = readJson(path.join(dir, "expected.json"));
  const tsorch = async (args: string[]) => (await promisify(execFile)(process.execPath, [CLI, ...args], { maxBuffer: 1 << 26 })).stdout;
  const f = JSON.parse(await tsorch(["forward", "--model", dir, "--input-ids", e.input_ids[0].join(","), "--output", "json"]));
  assert.ok(maxAbsDiff(f.logits.flat(), e.logits[0].flat()) < 1e-4);
  const g = JSON.parse(await tsorch(["generate", "--model", dir, "--input-ids", e.input_ids[0].join(","), "--max-new-tokens", "12", "--output", "json"]));
  assert.deepEqual(g.new_token_ids, e.greedy.single[0]);
});
