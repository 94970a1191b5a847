/** DecodeStream: streamed pieces concatenate to decode(), never end in half a character. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { DecodeStream } from "../src/transformers/decode_stream.js";
import { AutoTokenizer, type PreTrainedTokenizer } from "../src/transformers/index.js";
import { missing, readJson, STORIES } from "./helpers/shared.js";

interface StoriesExpected {
  generation: { input_ids: number[]; greedy_new_ids: number[] }[];
  greedy_from_bos: { new_ids: number[] };
}

const skip = missing(STORIES);

/** Streams ids one by one; returns the pieces, checking that none holds a partial character. */
function stream(tok: PreTrainedTokenizer, ids: number[], opts: ConstructorParameters<typeof DecodeStream>[1] = {}): string[] {
  const s = new DecodeStream(tok, opts);
  const pieces = ids.map((id) => s.put(id));
  pieces.push(s.end());
  for (const p of pieces) assert.ok(!p.includes("\uFFFD"), `piece ${JSON.stringify(p)} holds a partial character`);
  return pieces;
}

test("streamed pieces of the stories260K sequences concatenate to decode()", { skip }, async () => {
  const tok = await AutoTokenizer.fromPretrained(STORIES);
  const expected = readJson<StoriesExpected>(join(STORIES, "expected.json"));
  const sequences = [...expected.generation.map((g) => [...g.input_ids, ...g.greedy_new_ids]), [1, ...expected.greedy_from_bos.new_ids]];
  for (const ids of sequences) {
    for (const skipSpecialTokens of [false, true]) {
      assert.equal(stream(tok, ids, { skipSpecialTokens }).join(""), tok.decode(ids, { skipSpecialTokens }));
    }
  }
  // SentencePiece leading spaces come with the token that carries them; the first piece loses its own.
  assert.deepEqual(stream(tok, [1, 403, 407, 261, 378], { skipSpecialTokens: true }), ["", "Once", " upon", " a", " time", ""]);
  assert.deepEqual(stream(tok, [403, 2, 1, 407], { skipSpecialTokens: true }), ["Once", "", "", " upon", ""]);
});

test("byte-fallback characters (emoji, accents) are held back until complete", { skip }, async () => {
  const tok = await AutoTokenizer.fromPretrained(STORIES);
  const text = "héllo wörld 🙂 ok 🙂🙂";
  const ids = tok.encode(text);
  const pieces = stream(tok, ids, { skipSpecialTokens: true });
  assert.equal(pieces.join(""), text);
  assert.ok(pieces.includes("🙂"), "the emoji (four <0x..> tokens) comes out whole");
  // A sequence that truly ends in an incomplete character: the held U+FFFD comes out at end().
  const s = new DecodeStream(tok);
  assert.deepEqual([s.put(259), s.put(229), s.end()], ["t", "", "\uFFFD"]);
});

test("promptIds give context without being emitted", { skip }, async () => {
  const tok = await AutoTokenizer.fromPretrained(STORIES);
  const prompt = tok.encode("Once upon a time");
  const s = new DecodeStream(tok, { promptIds: prompt, skipSpecialTokens: true });
  // 432 is "," and 383 is "▁there": its space is kept because the prompt precedes it.
  assert.deepEqual([s.put(432), s.put(383), s.end()], [",", " there", ""]);
});
