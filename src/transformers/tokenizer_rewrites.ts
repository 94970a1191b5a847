/**
 * The load-time rewrites of transformers 5.18: a tokenizer class with its own __init__ (LlamaTokenizer,
 * GemmaTokenizer, Qwen2Tokenizer, Qwen3_5Tokenizer, GPT2Tokenizer) does not use tokenizer.json's pipeline. It
 * keeps the vocabulary, merges and post-processor, and builds the model options, normalizer, pre-tokenizer and
 * decoder itself (models/<family>/tokenization_<family>.py), from tokenizer_config.json's legacy and
 * add_prefix_space. This file applies the same rebuild to the parsed tokenizer.json. Classes not listed here load
 * tokenizer.json as it is (TokenizersBackend; also classes tsorch does not mirror, such as CLIP or T5).
 */
import type { JsonObject } from "../hub/index.js";

const SPIECE = "\u2581";

/** A BPE model of tokenizer.json's vocab and merges with the options a class passes to tokenizers.models.BPE. */
function bpe(model: JsonObject, options: JsonObject): JsonObject {
  let vocab = model.vocab;
  if (Array.isArray(vocab)) vocab = Object.fromEntries(vocab.map((entry, i) => [Array.isArray(entry) ? entry[0] : entry, i]));
  return {
    type: "BPE",
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
    ...options,
    vocab,
    merges: model.merges ?? [],
  };
}

/** The SentencePiece-style decoder of Llama and Gemma: ▁ to space, byte tokens to bytes, (maybe) one leading space dropped. */
function spieceDecoder(stripLeadingSpace: boolean): JsonObject {
  const decoders: JsonObject[] = [
    { type: "Replace", pattern: { String: SPIECE }, content: " " },
    { type: "ByteFallback" },
    { type: "Fuse" },
  ];
  if (stripLeadingSpace) decoders.push({ type: "Strip", content: " ", start: 1, stop: 0 });
  return { type: "Sequence", decoders };
}

/** A content string of a special-token config value ("<unk>" or {content: "<unk>", …}). */
function content(value: unknown, fallback: string): string {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null && typeof (value as JsonObject).content === "string") return (value as JsonObject).content as string;
  return fallback;
}

/**
 * LlamaTokenizer (models/llama/tokenization_llama.py): no normalizer; a Metaspace pre-tokenizer whose
 * prepend_scheme comes from add_prefix_space (default true) and legacy (default false), as
 * tokenization_utils_base._get_prepend_scheme: "never" without a prefix space, else "always" when legacy, else
 * "first" (▁ only at the start of the text, not after an added token); byte fallback on, no unk token.
 */
function llama(json: JsonObject, config: JsonObject): JsonObject {
  const addPrefixSpace = config.add_prefix_space ?? true;
  const legacy = config.legacy ?? false;
  const prependScheme = addPrefixSpace ? (legacy ? "always" : "first") : "never";
  return {
    ...json,
    model: bpe(json.model as JsonObject, { fuse_unk: true, byte_fallback: true }),
    normalizer: null,
    pre_tokenizer: { type: "Metaspace", replacement: SPIECE, prepend_scheme: prependScheme, split: false },
    decoder: spieceDecoder(Boolean(addPrefixSpace)),
  };
}

/**
 * GemmaTokenizer (models/gemma/tokenization_gemma.py): spaces become ▁ in a Replace normalizer, a Split on " "
 * (merged with the previous piece) pre-tokenizer, byte fallback with the config's unk token.
 */
function gemma(json: JsonObject, config: JsonObject): JsonObject {
  return {
    ...json,
    model: bpe(json.model as JsonObject, { unk_token: content(config.unk_token, "<unk>"), fuse_unk: true, byte_fallback: true }),
    normalizer: { type: "Replace", pattern: { String: " " }, content: SPIECE },
    pre_tokenizer: { type: "Split", pattern: { String: " " }, behavior: "MergedWithPrevious", invert: false },
    decoder: spieceDecoder(false),
  };
}

/** Qwen2Tokenizer's pre-tokenizer regex (models/qwen2/tokenization_qwen2.py). */
const QWEN2_REGEX = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
/** Qwen3_5Tokenizer's: letters and combining marks together (models/qwen3_5/tokenization_qwen3_5.py). */
const QWEN3_5_REGEX = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

/** Qwen2Tokenizer and Qwen3_5Tokenizer: NFC, the class's Split regex then ByteLevel without its own regex. */
function qwen(regex: string) {
  return (json: JsonObject, config: JsonObject): JsonObject => ({
    ...json,
    model: bpe(json.model as JsonObject, { continuing_subword_prefix: "", end_of_word_suffix: "" }),
    normalizer: { type: "NFC" },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: config.add_prefix_space ?? false, trim_offsets: true, use_regex: false },
      ],
    },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  });
}

/** GPT2Tokenizer (models/gpt2/tokenization_gpt2.py): no normalizer, ByteLevel with GPT-2's regex and the config's add_prefix_space. */
function gpt2(json: JsonObject, config: JsonObject): JsonObject {
  return {
    ...json,
    model: bpe(json.model as JsonObject, { continuing_subword_prefix: "", end_of_word_suffix: "" }),
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: config.add_prefix_space ?? false, trim_offsets: true, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  };
}

const REWRITES: Readonly<Record<string, (json: JsonObject, config: JsonObject) => JsonObject>> = {
  LlamaTokenizer: llama,
  GemmaTokenizer: gemma,
  Qwen2Tokenizer: qwen(QWEN2_REGEX),
  Qwen3_5Tokenizer: qwen(QWEN3_5_REGEX),
  GPT2Tokenizer: gpt2,
};

/** Whether transformers rebuilds tokenizers of this class instead of loading tokenizer.json as it is. */
export function rebuildsTokenizer(cls: string): boolean {
  return cls in REWRITES;
}

/**
 * tokenizer.json as transformers' class `cls` rebuilds it (a new object; `json` is not changed), or `json` itself
 * for a class that loads it as it is. Only the BPE model is rebuilt: for another model type (WordPiece, Unigram)
 * the file is used as it is.
 * @param cls the class from tokenizerClass()
 * @param json tokenizer.json
 * @param config tokenizer_config.json (legacy, add_prefix_space, unk_token)
 */
export function rewriteTokenizerJson(cls: string, json: JsonObject, config: JsonObject): JsonObject {
  const rewrite = REWRITES[cls];
  if (rewrite === undefined || (json.model as JsonObject).type !== "BPE") return json;
  return rewrite(json, config);
}
