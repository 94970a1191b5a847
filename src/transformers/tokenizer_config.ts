/**
 * What transformers' from_pretrained makes of tokenizer_config.json (with special_tokens_map.json merged in)
 * next to tokenizer.json: the named and extra special tokens, and the final list of added tokens with their
 * AddedToken flags (tokenization_utils_base._from_pretrained and TokenizersBackend.__init__, transformers 5.18).
 */
import type { JsonObject } from "../hub/index.js";
import type { AddedToken } from "./added_vocabulary.js";

/** transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order (the order of allSpecialIds). */
const NAMED_SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A special token value of a config: "<s>" or { content: "<s>", … }. */
function tokenContent(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  return isObject(value) && typeof value.content === "string" ? value.content : undefined;
}

/**
 * The named special tokens of a config, in transformers' order: the standard attributes, then any other
 * `*_token` key with a token value (model-specific tokens such as image_token), then a dict-valued
 * extra_special_tokens. These form special_tokens_map, which chat templates receive. Values keep their
 * config form ("<s>" or an AddedToken object) so that their flags can be used.
 */
export function namedSpecialTokens(config: JsonObject): Map<string, unknown> {
  const named = new Map<string, unknown>();
  const add = (key: string, value: unknown) => {
    if (tokenContent(value) !== undefined) named.set(key, value);
  };
  for (const key of NAMED_SPECIAL_TOKENS) add(key, config[key]);
  for (const [key, value] of Object.entries(config)) if (key.endsWith("_token") && !named.has(key)) add(key, value);
  const extra = config.extra_special_tokens;
  if (isObject(extra)) {
    for (const [key, value] of Object.entries(extra)) add(key, value);
  }
  return named;
}

/** The contents of namedSpecialTokens(config). */
export function namedSpecialContents(named: Map<string, unknown>): Map<string, string> {
  return new Map([...named].map(([key, value]) => [key, tokenContent(value)!]));
}

/** extra_special_tokens (or the older additional_special_tokens) when it is a list, in config form. */
function extraSpecialTokens(config: JsonObject): unknown[] {
  const extra = Array.isArray(config.extra_special_tokens) ? config.extra_special_tokens : config.additional_special_tokens;
  return Array.isArray(extra) ? extra.filter((t) => tokenContent(t) !== undefined) : [];
}

/** The contents of extraSpecialTokens(config). */
export function extraSpecialContents(config: JsonObject): string[] {
  return extraSpecialTokens(config).map((t) => tokenContent(t)!);
}

/** A token of tokenizer.json or added_tokens_decoder with the defaults of tokenizers' AddedToken (normalized = !special). */
function addedToken(entry: JsonObject, id: number): AddedToken {
  const special = entry.special === true;
  return {
    id,
    content: String(entry.content),
    single_word: entry.single_word === true,
    lstrip: entry.lstrip === true,
    rstrip: entry.rstrip === true,
    normalized: typeof entry.normalized === "boolean" ? entry.normalized : !special,
    special,
  };
}

/** A special token of the config: an AddedToken object keeps its flags (special forced on), a string gets special's defaults. */
function specialToken(value: unknown, id: number): AddedToken {
  if (isObject(value)) return { ...addedToken({ normalized: false, ...value }, id), special: true };
  return addedToken({ content: value, special: true }, id);
}

/**
 * The added tokens transformers' tokenizer ends up with, in the order they were added (a later entry for the same
 * content replaces the flags of the earlier one, as the Rust add_tokens does):
 * - a class that rebuilds its tokenizer (`rebuilds`) starts from added_tokens_decoder when the config has one,
 *   ignoring tokenizer.json's added_tokens; TokenizersBackend starts from tokenizer.json's and then adds the
 *   entries of added_tokens_decoder (their flags win for a token already there);
 * - then every named and extra special token that is not an added token yet (at its vocabulary id or after the
 *   last id), with the flags of its config object;
 * - Qwen2Tokenizer finally adds every special token again as AddedToken(content, special=True), which resets its
 *   lstrip/rstrip/single_word/normalized flags (models/qwen2/tokenization_qwen2.py).
 * @param json tokenizer.json (added_tokens and model.vocab are read)
 * @param vocabSize size of the model vocabulary
 * @param cls the transformers class (tokenizer_class.ts)
 * @param rebuilds whether that class rebuilds the tokenizer (tokenizer_rewrites.ts)
 */
export function mergeAddedTokens(json: JsonObject, config: JsonObject, vocabSize: number, cls: string, rebuilds: boolean): AddedToken[] {
  const decoder = isObject(config.added_tokens_decoder) ? (config.added_tokens_decoder as Record<string, JsonObject>) : undefined;
  const fromDecoder = Object.entries(decoder ?? {}).map(([id, entry]) => addedToken(entry, Number(id)));
  const fromJson = ((json.added_tokens ?? []) as JsonObject[]).map((entry) => addedToken(entry, Number(entry.id)));
  const byContent = new Map<string, AddedToken>();
  const add = (token: AddedToken) => {
    const present = byContent.get(token.content);
    byContent.set(token.content, present === undefined ? token : { ...token, id: present.id });
  };
  for (const token of rebuilds && decoder !== undefined ? fromDecoder : [...fromJson, ...fromDecoder]) add(token);

  const vocab = (json.model as JsonObject).vocab;
  const vocabId = (content: string): number | undefined => {
    if (Array.isArray(vocab)) {
      const i = vocab.findIndex((entry) => (Array.isArray(entry) ? entry[0] : entry) === content);
      return i < 0 ? undefined : i;
    }
    const id = (vocab as Record<string, number> | undefined)?.[content];
    return typeof id === "number" ? id : undefined;
  };
  let nextId = [...byContent.values()].reduce((next, t) => Math.max(next, t.id + 1), vocabSize);
  const specials = [...namedSpecialTokens(config).values(), ...extraSpecialTokens(config)];
  for (const value of specials) {
    const content = tokenContent(value)!;
    if (!byContent.has(content)) add(specialToken(value, vocabId(content) ?? nextId++));
  }
  if (cls === "Qwen2Tokenizer") {
    for (const value of specials) add(specialToken(tokenContent(value), 0));
  }
  return [...byContent.values()];
}

/**
 * The added_tokens_decoder transformers builds for a config without one from the older added_tokens.json
 * ({content: id}; a token is special when it is a named or extra special token, and normalized when it is not),
 * then tokenizer.json's added_tokens (which win for the same id). tokenization_utils_base._from_pretrained.
 * Throws naming the file when an id is not an integer.
 */
export function legacyAddedTokensDecoder(addedTokensJson: JsonObject, file: string, config: JsonObject, tokenizerJson: JsonObject): Record<string, JsonObject> {
  const specials = new Set([...namedSpecialContents(namedSpecialTokens(config)).values(), ...extraSpecialContents(config)]);
  const decoder: Record<string, JsonObject> = {};
  for (const [content, id] of Object.entries(addedTokensJson)) {
    if (!Number.isInteger(id)) throw new Error(`${file} is malformed: the id of ${JSON.stringify(content)} is not an integer`);
    const special = specials.has(content);
    decoder[String(id)] = { content, single_word: false, lstrip: false, rstrip: false, normalized: !special, special };
  }
  for (const entry of (tokenizerJson.added_tokens ?? []) as JsonObject[]) {
    const { id, ...token } = entry;
    decoder[String(id)] = token;
  }
  return decoder;
}
