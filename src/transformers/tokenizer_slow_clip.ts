/**
 * The "slow" CLIP tokenizer files (vocab.json + merges.txt, what SD and FLUX repos ship beside or
 * instead of tokenizer.json) as the tokenizer.json transformers builds from them (CLIPTokenizer,
 * convert_slow_tokenizer.py CLIPConverter): NFC + whitespace runs → " " + lowercase; CLIP's split
 * regex, then byte-level; BPE with end_of_word_suffix "</w>"; `<|startoftext|> … <|endoftext|>`.
 * As the slow tokenizer, only the first 49152 − 256 − 2 merges of merges.txt are read.
 */
import type { JsonObject } from "../hub/config.js";
import { isObject } from "./tokenizer_config.js";

/** CLIPTokenizer's cap on merges.txt lines (after the "#version" header). */
const MAX_MERGES = 49152 - 256 - 2;

/** The content of a special-token config entry (a string or an AddedToken dict). */
function content(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (isObject(v) && typeof v.content === "string") return v.content;
  return undefined;
}

/**
 * tokenizer.json for CLIP from vocab.json (token → id), merges.txt and tokenizer_config.json
 * (bos/eos/unk tokens; CLIP's defaults when absent). Throws naming the file when the vocab lacks a
 * special token or a merges line is malformed.
 */
export function clipTokenizerJson(vocab: JsonObject, mergesText: string, config: JsonObject, where: string): JsonObject {
  const bos = content(config.bos_token) ?? "<|startoftext|>";
  const eos = content(config.eos_token) ?? "<|endoftext|>";
  const unk = content(config.unk_token) ?? "<|endoftext|>";
  const lines = mergesText.trim().split("\n").slice(1, MAX_MERGES + 1);
  const merges = lines.map((line, i) => {
    const pair = line.split(" ");
    if (pair.length !== 2) throw new Error(`${where}/merges.txt line ${i + 2} is not a pair of tokens: ${JSON.stringify(line)}`);
    return pair;
  });
  const id = (token: string) => {
    const v = vocab[token];
    if (typeof v !== "number") throw new Error(`${where}/vocab.json has no id for special token ${token}`);
    return v;
  };
  const specials = [...new Set([bos, eos, unk, content(config.pad_token)].filter((t): t is string => t !== undefined && typeof vocab[t] === "number"))];
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: specials.map((t) => ({ id: id(t), content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })).sort((a, b) => a.id - b.id),
    normalizer: { type: "Sequence", normalizers: [{ type: "NFC" }, { type: "Replace", pattern: { Regex: "\\s+" }, content: " " }, { type: "Lowercase" }] },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+" }, behavior: "Removed", invert: true },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: { type: "RobertaProcessing", sep: [eos, id(eos)], cls: [bos, id(bos)], trim_offsets: false, add_prefix_space: false },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: unk, continuing_subword_prefix: "", end_of_word_suffix: "</w>",
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges,
    },
  };
}
