/**
 * Tokenizer fidelity: tsorch's ids against transformers' AutoTokenizer for every tokenizer class the supported
 * families load as (LlamaTokenizer, GemmaTokenizer, Qwen2Tokenizer, Qwen3_5Tokenizer, GPT2Tokenizer,
 * TokenizersBackend), with the load-time rewrites, legacy/add_prefix_space, add_bos_token/add_eos_token and
 * AddedToken flags, on awkward strings. The expected values and the folders' recipes are in
 * test/data/tokenizer_fidelity.json, made by test/data/tokenizer_fidelity.py (transformers 5.18).
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { AutoTokenizer, type ChatMessage } from "../src/transformers/index.js";
import { missing, readJson, ROOT, STORIES, TINY } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

interface Encoding {
  text: string;
  ids: number[];
  /** Ids without special tokens; absent when equal to ids. */
  ids_plain?: number[];
  decoded: string;
  /** Decoded with skip_special_tokens; absent when equal to decoded. */
  decoded_skip?: string;
}
interface Case {
  name: string;
  base: "stories" | "bytelevel";
  tokenizer: Record<string, unknown>;
  config: Record<string, unknown>;
  /**
   * config.json's model_type, or the whole config.json, or {fixture: name} for the config.json of
   * ../shared/fixtures/tiny/<name>, or null for a folder without config.json.
   */
  model_type: string | Record<string, unknown> | null;
  /** Further files of the folder (added_tokens.json). */
  files?: Record<string, unknown>;
  transformers_class: string;
  encodings: Encoding[];
  chat_template?: string;
  chat_ids?: number[];
}

const DATA = join(ROOT, "test/data");
const expected = readJson<{ conversation: ChatMessage[]; cases: Case[] }>(join(DATA, "tokenizer_fidelity.json"));
const skip = missing(STORIES) ?? missing(TINY);

/** Sets `value` at a dotted path ("model.unk_token") of a parsed JSON object; a path ending in "+" appends the list `value`. */
function setPath(obj: Record<string, unknown>, dotted: string, value: unknown): void {
  const append = dotted.endsWith("+");
  const keys = dotted.replace(/\+$/, "").split(".");
  let at = obj;
  for (const key of keys.slice(0, -1)) at = at[key] as Record<string, unknown>;
  const last = keys[keys.length - 1];
  at[last] = append ? [...(at[last] as unknown[]), ...(value as unknown[])] : value;
}

/** The folder a case describes, built as tokenizer_fidelity.py builds it. */
function folder(c: Case): string {
  const baseFile = c.base === "stories" ? join(STORIES, "tokenizer.json") : join(DATA, "tokenizer_bytelevel.json");
  const json = JSON.parse(readFileSync(baseFile, "utf8")) as Record<string, unknown>;
  for (const [path, value] of Object.entries(c.tokenizer)) setPath(json, path, value);
  const dir = tempDir(`tsorch-fidelity-${c.name}-`);
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(json));
  const config = Object.fromEntries(Object.entries(c.config).filter(([k, v]) => v !== null || k !== "tokenizer_class"));
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config));
  for (const [file, content] of Object.entries(c.files ?? {})) writeFileSync(join(dir, file), JSON.stringify(content));
  if (c.model_type !== null) {
    let modelConfig = typeof c.model_type === "string" ? { model_type: c.model_type } : c.model_type;
    if (typeof modelConfig.fixture === "string") modelConfig = readJson(join(TINY, modelConfig.fixture, "config.json"));
    writeFileSync(join(dir, "config.json"), JSON.stringify(modelConfig));
  }
  return dir;
}

for (const c of expected.cases) {
  test(`${c.name} (${c.transformers_class}): encode, decode and chat template ids as transformers`, { skip }, async () => {
    const tok = await AutoTokenizer.fromPretrained(folder(c));
    assert.equal(tok.tokenizerClass, c.transformers_class);
    for (const e of c.encodings) {
      const what = `${c.name}: ${JSON.stringify(e.text)}`;
      assert.deepEqual(tok.encode(e.text), e.ids, what);
      assert.deepEqual(tok.encode(e.text, { addSpecialTokens: false }), e.ids_plain ?? e.ids, `${what} without special tokens`);
      assert.equal(tok.decode(e.ids), e.decoded, `${what} decoded`);
      assert.equal(tok.decode(e.ids, { skipSpecialTokens: true }), e.decoded_skip ?? e.decoded, `${what} decoded, special tokens skipped`);
    }
    if (c.chat_ids !== undefined) {
      assert.deepEqual(tok.applyChatTemplate(expected.conversation, { chatTemplate: c.chat_template, addGenerationPrompt: true }), c.chat_ids);
    }
  });
}
