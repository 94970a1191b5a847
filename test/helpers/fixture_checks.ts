/**
 * The standard checks of a tiny fixture (../shared/fixtures/tiny/<model_type>) against the
 * outputs transformers produced: full float32 logits within a tolerance, and 12-token greedy ids
 * of each prompt alone and of the left-padded batch, with the dynamic and the static KV cache;
 * and the same through the `tsorch` CLI.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { AutoModelForCausalLM, type CacheImplementation, type PreTrainedModel } from "../../src/transformers/index.js";
import { existsSync } from "node:fs";
import { CLI, maxAbsDiff, missing, readJson, ROOT, TINY } from "./shared.js";

const CACHES: CacheImplementation[] = ["dynamic", "static"];
const run = promisify(execFile);

/** expected.json of a fixture, as make_fixtures.py writes it. */
export interface FixtureExpected {
  input_ids: number[][];
  logits: number[][][];
  greedy: { max_new_tokens: number; single: number[][] };
  greedy_left_padded: { input_ids: number[][]; attention_mask: number[][]; new_tokens: number[][] };
}

/**
 * expected.json of fixture `arch`. Where transformers' float32 logits are ill-conditioned (its own
 * float32 run is more than 2e-5 from its float64 run: the Gated DeltaNet fixtures, 4-7e-5), the
 * logits are replaced by transformers' float64 logits from test/data/float64_logits (made by
 * test/data/make_float64_logits.py), so the 1e-4 tolerance measures tsorch's error, not PyTorch's.
 */
export function fixtureExpected(arch: string): FixtureExpected {
  const e = readJson<FixtureExpected>(path.join(TINY, arch, "expected.json"));
  const f64 = path.join(ROOT, "test/data/float64_logits", `${arch}.json`);
  if (existsSync(f64)) e.logits = readJson(f64).logits;
  return e;
}

/** Full logits [2, 7, vocab] within `tol` absolute. */
export async function checkLogits(model: PreTrainedModel, e: FixtureExpected, tol: number): Promise<void> {
  const logits = model.logits(e.input_ids);
  assert.deepEqual(logits.shape, [e.input_ids.length, e.input_ids[0].length, e.logits[0][0].length]);
  const diff = maxAbsDiff((await logits.data()) as Float32Array, e.logits.flat(2));
  assert.ok(diff < tol, `max abs diff ${diff}`);
}

/** Greedy ids (eos off, as the fixtures were made) of each row and of the left-padded batch, both caches. */
export async function checkGreedy(model: PreTrainedModel, e: FixtureExpected): Promise<void> {
  const n = e.greedy.max_new_tokens;
  for (const cacheImplementation of CACHES) {
    const opts = { maxNewTokens: n, doSample: false, cacheImplementation, eosTokenId: [] };
    for (let b = 0; b < e.input_ids.length; b++) {
      const out = await model.generate(e.input_ids[b], opts);
      assert.deepEqual(out.slice(e.input_ids[b].length), e.greedy.single[b], `${cacheImplementation} row ${b}`);
    }
    const lp = e.greedy_left_padded;
    const out = await model.generate(lp.input_ids, { ...opts, attentionMask: lp.attention_mask });
    assert.deepEqual(out.map((r) => r.slice(lp.input_ids[0].length)), lp.new_tokens, `${cacheImplementation} left-padded batch`);
  }
}

/** Register the logits (within 1e-4) and greedy tests of fixture `arch` on the cpu. */
export function testTinyFixture(arch: string): void {
  const dir = path.join(TINY, arch);
  test(`${arch} (tiny): full logits within 1e-4`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    await checkLogits(await AutoModelForCausalLM.fromPretrained(dir), fixtureExpected(arch), 1e-4);
  });
  test(`${arch} (tiny): single and left-padded batch greedy ids, dynamic and static cache`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    await checkGreedy(await AutoModelForCausalLM.fromPretrained(dir), fixtureExpected(arch));
  });
}

/** Register a test of `tsorch forward` and `tsorch generate --output json` (one row, and rows of
 * different lengths that the CLI left-pads) on fixture `arch`. */
export function testCliOnFixture(arch: string): void {
  const dir = path.join(TINY, arch);
  test(`${arch} (tiny): tsorch forward and generate --output json match transformers`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const e = fixtureExpected(arch);
    const tsorch = async (args: string[]) => JSON.parse((await run(process.execPath, [CLI, ...args], { maxBuffer: 1 << 26 })).stdout);
    const f = await tsorch(["forward", "--model", dir, "--input-ids", e.input_ids[0].join(","), "--output", "json"]);
    assert.ok(maxAbsDiff(f.logits.flat(), e.logits[0].flat()) < 1e-4);
    const g = await tsorch(["generate", "--model", dir, "--input-ids", e.input_ids[0].join(","), "--max-new-tokens", String(e.greedy.max_new_tokens), "--output", "json"]);
    assert.deepEqual(g.new_token_ids, e.greedy.single[0]);
    const lp = e.greedy_left_padded;
    const pads = lp.attention_mask[1].indexOf(1);
    const rows = [lp.input_ids[0].join(","), lp.input_ids[1].slice(pads).join(",")].join(";");
    const gb = await tsorch(["generate", "--model", dir, "--input-ids", rows, "--max-new-tokens", String(e.greedy.max_new_tokens), "--output", "json"]);
    assert.deepEqual(gb.new_token_ids, lp.new_tokens);
  });
}
