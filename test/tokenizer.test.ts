/** PreTrainedTokenizer against transformers' reference outputs in ../shared (stories260K, diffusers fixtures). */
import assert from "node:assert/strict";
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { AutoTokenizer, PreTrainedTokenizer } from "../src/transformers/index.js";
import { missing, readJson, SHARED, STORIES } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

interface StoriesExpected {
  tokenizer: { text: string; ids: number[]; decoded: string }[];
  generation: { prompt: string; input_ids: number[]; greedy_new_ids: number[]; greedy_text: string }[];
  greedy_from_bos: { new_ids: number[]; text: string };
}

const skipStories = missing(STORIES);
const load = () => AutoTokenizer.fromPretrained(STORIES);

/** A folder under the OS temp dir holding stories260K's tokenizer.json and the given files. */
function tokenizerFolder(files: Record<string, string>): string {
  const dir = tempDir("tsorch-tokenizer-");
  copyFileSync(join(STORIES, "tokenizer.json"), join(dir, "tokenizer.json"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

test("stories260K: encode gives transformers' ids, decode(skipSpecialTokens) its text", { skip: skipStories }, async () => {
  const tok = await load();
  for (const e of readJson<StoriesExpected>(join(STORIES, "expected.json")).tokenizer) {
    assert.deepEqual(tok.encode(e.text), e.ids, e.text);
    assert.equal(tok.decode(e.ids, { skipSpecialTokens: true }), e.decoded, e.text);
  }
});

test("stories260K: generation prompts and greedy continuations decode as transformers", { skip: skipStories }, async () => {
  const tok = await load();
  const expected = readJson<StoriesExpected>(join(STORIES, "expected.json"));
  // expected.json: greedy_text = tok.decode(input_ids + new ids, skip_special_tokens=True).
  for (const g of expected.generation) {
    assert.deepEqual(tok.encode(g.prompt), g.input_ids);
    assert.equal(tok.decode([...g.input_ids, ...g.greedy_new_ids], { skipSpecialTokens: true }), g.greedy_text);
  }
  const fromBos = expected.greedy_from_bos;
  assert.equal(tok.decode([1, ...fromBos.new_ids], { skipSpecialTokens: true }), fromBos.text);
});

test("stories260K: special tokens, vocabulary and config values", { skip: skipStories }, async () => {
  const tok = await load();
  // transformers 5.18: bos 1, eos 2, unk 0, pad None, all_special_ids [1, 2, 0], vocab_size 512, model_max_length 1e30.
  assert.equal(tok.bosTokenId, 1);
  assert.equal(tok.eosTokenId, 2);
  assert.equal(tok.unkTokenId, 0);
  assert.equal(tok.padTokenId, undefined);
  assert.deepEqual(tok.allSpecialIds, [1, 2, 0]);
  assert.equal(tok.vocabSize, 512);
  assert.equal(tok.modelMaxLength, 1e30);
  assert.deepEqual(tok.encode("hello", { addSpecialTokens: false }), [281, 306, 414]);
  assert.deepEqual(tok.encode(""), [1]);
});

test("decode matches the Rust tokenizer on edge cases", { skip: skipStories }, async () => {
  const tok = await load();
  // From transformers 5.18 (tokenizers backend): [tok.decode(ids), tok.decode(ids, skip_special_tokens=True)].
  // An invalid byte-fallback run becomes one U+FFFD per byte; unknown ids are dropped.
  const cases: [number[], string, string][] = [
    [[259, 229, 133], "t\uFFFD\uFFFD", "t\uFFFD\uFFFD"],
    [[229, 133, 130, 259], "\uFFFD\uFFFD\uFFFD t", "\uFFFD\uFFFD\uFFFD t"],
    [[31, 229, 133], "\uFFFD\uFFFD\uFFFD", "\uFFFD\uFFFD\uFFFD"],
    [[243, 162, 156, 133, 243, 162], "\uFFFD".repeat(6), "\uFFFD".repeat(6)],
    [[1, 259], "<s> t", "t"],
    [[259, 1, 259], "t<s> t", "t t"],
    [[403, 2, 1, 407], "Once</s><s> upon", "Once upon"],
    [[1, 2, 0], "<s></s><unk>", ""],
    [[259, 13, 403], "t\n Once", "t\n Once"],
    [[9999, 259], "t", "t"],
    [[], "", ""],
  ];
  for (const [ids, plain, skipped] of cases) {
    assert.equal(tok.decode(ids), plain, JSON.stringify(ids));
    assert.equal(tok.decode(ids, { skipSpecialTokens: true }), skipped, JSON.stringify(ids));
  }
});

test("batchEncode pads with the pad token, and refuses to pad without one", { skip: skipStories }, async () => {
  const noPad = await load();
  assert.deepEqual(noPad.batchEncode(["Hi", "Once upon a time"]), {
    inputIds: [[1, 320, 417], [1, 403, 407, 261, 378]],
    attentionMask: [[1, 1, 1], [1, 1, 1, 1, 1]],
  });
  assert.throws(() => noPad.batchEncode(["Hi", "Once upon a time"], { padding: true }), /has no pad token/);
  assert.deepEqual(noPad.batchEncode(["Hi", "Hi"], { padding: true }).inputIds, [[1, 320, 417], [1, 320, 417]]);

  const config = { bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>", pad_token: "<unk>" };
  const tok = await AutoTokenizer.fromPretrained(tokenizerFolder({ "tokenizer_config.json": JSON.stringify(config) }));
  assert.equal(tok.padTokenId, 0);
  // transformers 5.18: tok(["Hi", "Once upon a time"], padding=True, padding_side="left").
  assert.deepEqual(tok.batchEncode(["Hi", "Once upon a time"], { padding: true, paddingSide: "left" }), {
    inputIds: [[0, 0, 1, 320, 417], [1, 403, 407, 261, 378]],
    attentionMask: [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]],
  });
  assert.deepEqual(tok.batchEncode(["Hi", "Once upon a time"], { padding: true }), {
    inputIds: [[1, 320, 417, 0, 0], [1, 403, 407, 261, 378]],
    attentionMask: [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]],
  });
});

test("config details: {content} special tokens, ignored add_eos_token, special_tokens_map.json", { skip: skipStories }, async () => {
  const bosObject = { __type: "AddedToken", content: "<s>", lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
  const withEos = await AutoTokenizer.fromPretrained(
    tokenizerFolder({ "tokenizer_config.json": JSON.stringify({ bos_token: bosObject, eos_token: "</s>", add_bos_token: true, add_eos_token: true }) }),
  );
  assert.equal(withEos.bosTokenId, 1);
  // transformers 5.18 drops add_bos_token/add_eos_token when there is a tokenizer.json: tok("Hi").input_ids.
  assert.deepEqual(withEos.encode("Hi"), [1, 320, 417]);

  const legacy = await AutoTokenizer.fromPretrained(
    tokenizerFolder({ "tokenizer_config.json": "{}", "special_tokens_map.json": JSON.stringify({ eos_token: { content: "</s>" }, pad_token: "<unk>" }) }),
  );
  assert.equal(legacy.eosTokenId, 2);
  assert.equal(legacy.padTokenId, 0);
  assert.equal(legacy.bosTokenId, undefined);
  assert.deepEqual(legacy.allSpecialIds, [2, 0]);
});

test("fromPretrained names the folder when tokenizer.json is missing, malformed or unsupported", { skip: skipStories }, async () => {
  const empty = tempDir("tsorch-tokenizer-");
  await assert.rejects(PreTrainedTokenizer.fromPretrained(empty), (e: Error) => e.message.includes(empty) && e.message.includes("no tokenizer.json"));
  const broken = tokenizerFolder({});
  writeFileSync(join(broken, "tokenizer.json"), "{ not json");
  await assert.rejects(PreTrainedTokenizer.fromPretrained(broken), (e: Error) => e.message.includes(join(broken, "tokenizer.json")));
  writeFileSync(join(broken, "tokenizer.json"), "{}");
  await assert.rejects(PreTrainedTokenizer.fromPretrained(broken), /tokenizer\.json is malformed: it has no "model" object/);
  const json = readJson<Record<string, unknown>>(join(STORIES, "tokenizer.json"));
  writeFileSync(join(broken, "tokenizer.json"), JSON.stringify({ ...json, decoder: { type: "Bogus" } }));
  await assert.rejects(PreTrainedTokenizer.fromPretrained(broken), (e: Error) => e.message.includes(broken) && e.message.includes("Unknown Decoder type: Bogus"));
  const rejectsWith = async (edit: Record<string, unknown>, message: RegExp) => {
    writeFileSync(join(broken, "tokenizer.json"), JSON.stringify({ ...json, ...edit }));
    await assert.rejects(PreTrainedTokenizer.fromPretrained(broken), (e: Error) => e.message.includes(broken) && message.test(e.message));
  };
  await rejectsWith({ pre_tokenizer: { type: "Split", pattern: { String: " " }, behavior: "Sideways" } }, /Split behavior "Sideways" is not one of Removed, Isolated/);
  await rejectsWith({ pre_tokenizer: { type: "Split", pattern: { Glob: "*" }, behavior: "Isolated" } }, /pattern \{"Glob":"\*"\} is neither/);
  await rejectsWith({ post_processor: { type: "Shuffle" } }, /Unknown PostProcessor type: Shuffle/);
  const template = { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<bos>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }], special_tokens: {} };
  await rejectsWith({ post_processor: template }, /template token "<bos>" has no entry in special_tokens/);
});

const DIFFUSERS = join(SHARED, "fixtures/diffusers");

test("diffusers fixtures: CLIP (byte-level BPE) and T5 (Unigram) tokenizers give transformers' ids", { skip: missing(DIFFUSERS) }, async () => {
  for (const [pipeline, sub] of [["sd_tiny", "tokenizer"], ["flux_tiny", "tokenizer"], ["flux_tiny", "tokenizer_2"]]) {
    const tok = await AutoTokenizer.fromPretrained(join(DIFFUSERS, pipeline, sub));
    const checks = readJson<{ tokenizer_checks: Record<string, { text: string; input_ids: number[] }[]> }>(join(DIFFUSERS, pipeline, "expected.json"));
    for (const c of checks.tokenizer_checks[sub]) assert.deepEqual(tok.encode(c.text), c.input_ids, `${pipeline}/${sub}: ${c.text}`);
  }
  // transformers 5.18: decode(input_ids, skip_special_tokens=True) of "A Painting of a SQUIRREL eating a burger!!".
  const clip = await AutoTokenizer.fromPretrained(join(DIFFUSERS, "sd_tiny/tokenizer"));
  assert.equal(clip.decode([998, 320, 602, 517, 320, 767, 68, 676, 320, 684, 0, 256, 999], { skipSpecialTokens: true }), "a painting of a squirrel eating a burger !!");
  assert.equal(clip.padTokenId, 999);
  assert.equal(clip.modelMaxLength, 77);
  const t5 = await AutoTokenizer.fromPretrained(join(DIFFUSERS, "flux_tiny/tokenizer_2"));
  const ids = t5.encode("A Painting of a SQUIRREL eating a burger!!");
  assert.equal(t5.decode(ids), "A Painting of a SQU<unk>RREL eating a burger!!</s>");
  assert.equal(t5.decode(ids, { skipSpecialTokens: true }), "A Painting of a SQURREL eating a burger!!");
  assert.equal(t5.vocabSize, 571);
  // transformers 5.18: all_special_ids[:4] == [1, 2, 0, 570], 103 in all (</s>, <unk>, <pad>, 100 <extra_id_N>).
  assert.deepEqual(t5.allSpecialIds.slice(0, 4), [1, 2, 0, 570]);
  assert.equal(t5.allSpecialIds.length, 103);
});
