/**
 * Qwen3.5 text (hybrid Gated DeltaNet + gated full attention) against Hugging Face transformers'
 * outputs on the tiny random qwen3_5_text fixture: full logits within 1e-4 absolute; greedy ids of
 * single rows and of a left-padded batch (padding must not enter the recurrent state), with
 * dynamic and static caches; and the CLI.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { AutoModelForCausalLM, type CacheImplementation } from "../src/transformers/index.js";
import { CLI, maxAbsDiff, missing, readJson, TINY } from "./helpers/shared.js";

const CACHES: CacheImplementation[] = ["dynamic", "static"];

const dir = path.join(TINY, "qwen3_5_text");

test("qwen3_5_text (tiny): full logits within 1e-4", async (t) => {
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const e = readJson(path.join(dir, "expected.json"));
  const model = await AutoModelForCausalLM.fromPretrained(dir);
  const logits = model.logits(e.input_ids);
  assert.deepEqual(logits.shape, [2, 7, 512]);
  const diff = maxAbsDiff((await logits.data()) as Float32Array, e.logits.flat(2));
  assert.ok(diff < 1e-4, `max abs diff ${diff}`);
});

test("qwen3_5_text (tiny): single and left-padded batch greedy ids, dynamic and static cache", async (t) => {
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

test("qwen3_5_text (tiny): tsorch forward and generate --output json match transformers", async (t) => {
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const e = readJson(path.join(dir, "expected.json"));
  const tsorch = async (args: string[]) => (await promisify(execFile)(process.execPath, [CLI, ...args], { maxBuffer: 1 << 26 })).stdout;
  const f = JSON.parse(await tsorch(["forward", "--model", dir, "--input-ids", e.input_ids[0].join(","), "--output", "json"]));
  assert.ok(maxAbsDiff(f.logits.flat(), e.logits[0].flat()) < 1e-4);
  const g = JSON.parse(await tsorch(["generate", "--model", dir, "--input-ids", e.input_ids[0].join(","), "--max-new-tokens", "12", "--output", "json"]));
  assert.deepEqual(g.new_token_ids, e.greedy.single[0]);
  // Rows of different lengths: the CLI left-pads them, as the fixture's left-padded batch.
  const lp = e.greedy_left_padded;
  const rows = [lp.input_ids[0].join(","), lp.input_ids[1].slice(3).join(",")].join(";");
  const gb = JSON.parse(await tsorch(["generate", "--model", dir, "--input-ids", rows, "--max-new-tokens", "12", "--output", "json"]));
  assert.deepEqual(gb.new_token_ids, lp.new_tokens);
});
