/**
 * generate()'s length and generation_config.json semantics against transformers 5.18
 * (test/data/generation_reference.json, made by generation_reference.py): max_length, the default
 * length, rope models past max_position_embeddings, GPT-2's learned-position limit, sampling
 * parameters checked only when sampling, explicit options over generation_config.json, finish
 * reasons; unknown option names; tail-only stop-string decoding; the unseeded RNG's source.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { AutoModelForCausalLM, AutoTokenizer, type GenerationOptions } from "../src/transformers/index.js";
import { Random } from "../src/transformers/generation/rng.js";
import { apiOptions, caseModelDir, expectedError, generationCases, SOURCES } from "./helpers/generation_cases.js";
import { missing, readJson, STORIES } from "./helpers/shared.js";
import * as path from "node:path";

test("generate() follows transformers' length, generation_config and precedence rules (every reference case)", async (t) => {
  for (const dir of Object.values(SOURCES)) {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
  }
  for (const c of generationCases()) {
    const dir = caseModelDir(c);
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    const opts: GenerationOptions = {
      ...apiOptions(c.kwargs),
      ...(c.tokenizer && { tokenizer: await AutoTokenizer.fromPretrained(dir) }),
      ...(c.attention_mask && { attentionMask: c.attention_mask }),
      seed: 7,
    };
    const batch = Array.isArray(c.prompt[0]);
    if (c.error) {
      await assert.rejects(model.generate(c.prompt as number[][], opts), expectedError(c, (o) => o), c.name);
      continue;
    }
    const out = await model.generate(c.prompt as number[][], { ...opts, returnDictInGenerate: true });
    const L = batch ? (c.prompt as number[][])[0].length : c.prompt.length;
    if (batch) {
      assert.deepEqual(out.sequences.map((r) => r.slice(L)), c.padded, c.name);
    } else {
      assert.deepEqual((out.sequences as unknown as number[]).slice(L), c.new_ids, c.name);
    }
    assert.deepEqual(out.finishReason, c.finish_reason, c.name);
    if (!batch) {
      // A static cache is sized for the real generation length (prompt + new tokens), past max_position_embeddings too.
      const fixed = await model.generate(c.prompt as number[], { ...opts, cacheImplementation: "static", returnDictInGenerate: false });
      assert.deepEqual(fixed.slice(L), c.new_ids, `${c.name} (static cache)`);
    }
  }
});

test("generateStream reports each row's finish reason as it ends; generate() keeps returning plain sequences", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const greedy = readJson(path.join(STORIES, "expected.json")).generation[0];
  const prompt = greedy.input_ids as number[];
  const eos = greedy.greedy_new_ids[3]; // transformers' 4th greedy token
  const stream = model.generateStream([prompt], { maxNewTokens: 8, eosTokenId: eos });
  const seen: (string | null)[] = [];
  for await (const _ of stream) seen.push(stream.finishReasons[0]);
  assert.deepEqual(seen, [null, null, null, "eos"]);
  const plain = await model.generate(prompt, { maxNewTokens: 3 });
  assert.deepEqual(plain, [...prompt, ...greedy.greedy_new_ids.slice(0, 3)]);
  const dict = await model.generate(prompt, { maxNewTokens: 3, returnDictInGenerate: true });
  assert.deepEqual(dict, { sequences: plain, finishReason: "length" });
});

test("a generation_config.json cache_implementation tsorch lacks falls back to the dynamic cache (same tokens)", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const greedy = readJson(path.join(STORIES, "expected.json")).generation[0];
  for (const cache of ["hybrid", "offloaded", "static"]) {
    const dir = caseModelDir({ name: "", model: "stories260K", config: {}, generation_config: { cache_implementation: cache }, prompt: [], attention_mask: null, kwargs: {}, tokenizer: false });
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    const out = await model.generate(greedy.input_ids as number[], { maxNewTokens: 8 });
    assert.deepEqual(out.slice(greedy.input_ids.length), greedy.greedy_new_ids.slice(0, 8), cache);
  }
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  await assert.rejects(model.generate([1], { cacheImplementation: "offloaded" as never }), /cacheImplementation must be 'dynamic' or 'static', got "offloaded"/);
});

test("unknown option names are refused, naming the closest valid option", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ max_new_tokens: 5 }, /unknown generate option 'max_new_tokens'; did you mean 'maxNewTokens'\?/],
    [{ top_p: 0.5 }, /'top_p'; did you mean 'topP'\?/],
    [{ temprature: 0.5 }, /'temprature'; did you mean 'temperature'\?/],
    [{ stopString: ["x"] }, /'stopString'; did you mean 'stopStrings'\?/],
    [{ frobnicate: 1 }, /unknown generate option 'frobnicate'; valid options: maxNewTokens, /],
  ];
  for (const [opts, re] of cases) {
    await assert.rejects(model.generate([1], opts as GenerationOptions), re);
    assert.throws(() => model.generateStream([[1]], opts as GenerationOptions), re);
  }
});

test("stop strings decode only the sequence's tail, and still match transformers", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const tokenizer = await AutoTokenizer.fromPretrained(STORIES);
  const story = readJson(path.join(STORIES, "expected.json")).greedy_from_bos.new_ids as number[];
  let longest = 0, calls = 0;
  const counting = {
    decode(ids: number[], opts?: { skipSpecialTokens?: boolean }) {
      calls++;
      longest = Math.max(longest, ids.length);
      return tokenizer.decode(ids, opts);
    },
  };
  // "zebra" never occurs in transformers' 200-token greedy story: generation runs to the end.
  const out = await model.generate([1], { maxNewTokens: story.length, stopStrings: ["zebra", "."], tokenizer: counting, returnDictInGenerate: true });
  assert.ok(calls > 0);
  assert.equal(out.finishReason, "stop_string");
  const full = await model.generate([1], { maxNewTokens: story.length, stopStrings: ["zebra"], tokenizer: counting, returnDictInGenerate: true });
  assert.deepEqual(full.sequences.slice(1), story);
  assert.equal(full.finishReason, "length");
  assert.ok(longest <= 24, `decoded ${longest} tokens at once; a stop-string check should decode only the tail`);
  assert.deepEqual(out.sequences.slice(1), story.slice(0, out.sequences.length - 1));
  assert.ok(tokenizer.decode(out.sequences.slice(1)).endsWith("."));
});

test("an unseeded RNG draws its state from crypto, not the clock", (t) => {
  t.mock.method(Date, "now", () => 1_700_000_000_000);
  const a = new Random(), b = new Random();
  const draws = (r: Random) => Array.from({ length: 4 }, () => r.next());
  assert.notDeepEqual(draws(a), draws(b));
  assert.deepEqual(draws(new Random(5)), draws(new Random(5)));
});
