/**
 * Tokenizers: a Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json) behind the API of
 * transformers' PreTrainedTokenizer, camel-cased. The encoding pipeline itself (normalizer, pre-tokenizer,
 * model, post-processor, decoder) is @huggingface/tokenizers; this file adds what transformers layers on
 * top: special tokens from the config, padding, chat templates, and the few places where the JS library
 * and the Rust `tokenizers` crate that transformers uses disagree.
 */
import { Template } from "@huggingface/jinja";
import * as tokenizersJs from "@huggingface/tokenizers";
import type { JsonObject } from "../hub/config.js";
import { modelSource, parseJsonObject, type SourceOptions } from "../hub/source.js";

// ---------------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------------

/** One chat message. Extra fields (tool_calls, name, …) are passed to the template as they are. */
export interface ChatMessage {
  role: string;
  content: string;
  [field: string]: unknown;
}

/** Options of {@link PreTrainedTokenizer.applyChatTemplate}, as transformers' apply_chat_template. */
export interface ChatTemplateOptions {
  /** Append the header that starts an assistant turn (default false). */
  addGenerationPrompt?: boolean;
  /** Return token ids instead of the rendered string (default true, as in transformers). */
  tokenize?: boolean;
  /** Tool JSON schemas, passed to the template as `tools` (else `tools` is none). */
  tools?: object[];
  /** A template name (when the tokenizer has several) or a template string to use instead of the model's. */
  chatTemplate?: string;
  /** Further template variables (e.g. `{ enable_thinking: false }`, `documents`); they override special tokens. */
  templateKwargs?: Record<string, unknown>;
}

/** Result of {@link PreTrainedTokenizer.batchEncode}: one row per text. */
export interface BatchEncoding {
  inputIds: number[][];
  attentionMask: number[][];
}

/** Loading options of {@link PreTrainedTokenizer.fromPretrained}, passed on to the hub resolver. */
export type FromPretrainedOptions = SourceOptions;

// ---------------------------------------------------------------------------------------------------
// Config handling (what transformers' from_pretrained does with the files of a tokenizer folder)
// ---------------------------------------------------------------------------------------------------

/** transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order (the order of allSpecialIds). */
const NAMED_SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];

/** transformers' VERY_LARGE_INTEGER, the model_max_length of a config that gives none. */
const VERY_LARGE_INTEGER = 1e30;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An added token as tokenizer.json and tokenizer_config.json's added_tokens_decoder store it. */
interface AddedTokenJson {
  id: number;
  content: string;
  single_word?: boolean;
  lstrip?: boolean;
  rstrip?: boolean;
  normalized?: boolean;
  special?: boolean;
}

/** A special token value of a config: "<s>" or { content: "<s>", … }. */
function tokenContent(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  return isObject(value) && typeof value.content === "string" ? value.content : undefined;
}

/**
 * The named special tokens of a config, in transformers' order: the standard attributes, then any other
 * `*_token` key with a token value (model-specific tokens such as image_token), then a dict-valued
 * extra_special_tokens. These form special_tokens_map, which chat templates receive.
 */
function namedSpecialTokens(config: JsonObject): Map<string, string> {
  const named = new Map<string, string>();
  const add = (key: string, value: unknown) => {
    const content = tokenContent(value);
    if (content !== undefined) named.set(key, content);
  };
  for (const key of NAMED_SPECIAL_TOKENS) add(key, config[key]);
  for (const [key, value] of Object.entries(config)) if (key.endsWith("_token") && !named.has(key)) add(key, value);
  const extra = config.extra_special_tokens;
  if (isObject(extra)) {
    for (const [key, value] of Object.entries(extra)) add(key, value);
  }
  return named;
}

/** extra_special_tokens (or the older additional_special_tokens) when it is a list. */
function extraSpecialTokens(config: JsonObject): string[] {
  const extra = Array.isArray(config.extra_special_tokens) ? config.extra_special_tokens : config.additional_special_tokens;
  return Array.isArray(extra) ? extra.map(tokenContent).filter((t): t is string => t !== undefined) : [];
}

/**
 * Adds to tokenizer.json's added_tokens what transformers adds to the Rust tokenizer on load: the
 * entries of added_tokens_decoder (their flags win for a token already present), and every named or
 * extra special token that is not an added token yet (as a special token, at its vocabulary id or
 * after the last id). Skipping special tokens in decode works on exactly this set.
 */
function mergeAddedTokens(json: JsonObject, config: JsonObject, named: Map<string, string>, vocabSize: number): void {
  const added = ((json.added_tokens as AddedTokenJson[] | undefined) ?? []).map((t) => ({ ...t }));
  const byContent = new Map(added.map((t) => [t.content, t]));
  const vocab = (json.model as JsonObject).vocab;
  const vocabId = (content: string): number | undefined => {
    if (Array.isArray(vocab)) {
      const i = vocab.findIndex((entry) => Array.isArray(entry) && entry[0] === content);
      return i < 0 ? undefined : i;
    }
    const id = (vocab as Record<string, number> | undefined)?.[content];
    return typeof id === "number" ? id : undefined;
  };
  const addToken = (token: AddedTokenJson) => {
    added.push(token);
    byContent.set(token.content, token);
  };
  const decoder = (config.added_tokens_decoder ?? {}) as Record<string, Omit<AddedTokenJson, "id">>;
  for (const [id, token] of Object.entries(decoder)) {
    const present = byContent.get(token.content);
    if (present) Object.assign(present, token, { id: present.id });
    else addToken({ ...token, id: Number(id) });
  }
  let nextId = added.reduce((next, t) => Math.max(next, t.id + 1), vocabSize);
  for (const content of [...named.values(), ...extraSpecialTokens(config)]) {
    if (byContent.has(content)) continue;
    const id = vocabId(content) ?? nextId++;
    addToken({ id, content, special: true, normalized: false });
  }
  json.added_tokens = added;
}

/** Size of the model's own vocabulary (transformers' vocab_size: added tokens not counted). */
function modelVocabSize(json: JsonObject): number {
  const vocab = (json.model as JsonObject).vocab;
  if (Array.isArray(vocab)) return vocab.length;
  return Object.keys((vocab ?? {}) as object).length;
}

/** chat_template of a config: a string, or a list of {name, template} which becomes a name → template map. */
function parseChatTemplate(value: unknown): string | Map<string, string> | undefined {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return new Map(value.map((t: { name: string; template: string }) => [t.name, t.template]));
  return undefined;
}

// ---------------------------------------------------------------------------------------------------
// @huggingface/tokenizers, typed, and its ByteFallback decoder made to decode as the Rust crate does
// ---------------------------------------------------------------------------------------------------

// The package's typings use extension-less relative imports, which NodeNext cannot resolve, so all its
// exports type as `any`. These are the parts used here, as the package's own .d.ts files declare them.
interface JsDecoder {
  config: unknown;
  added_tokens: unknown[];
  end_of_word_suffix: string | null;
  decode_chain(tokens: string[]): string[];
}
interface JsTokenizer {
  decoder: JsDecoder | null;
  encode(text: string, opts: { add_special_tokens: boolean }): { ids: number[] };
  decode(ids: number[], opts: { skip_special_tokens: boolean; clean_up_tokenization_spaces: boolean }): string;
  token_to_id(token: string): number | undefined;
  id_to_token(id: number): string | undefined;
}
const { Tokenizer, ByteFallbackDecoder, SequenceDecoder } = tokenizersJs as unknown as {
  Tokenizer: new (tokenizerJson: object, config: object) => JsTokenizer;
  ByteFallbackDecoder: new (config: unknown) => JsDecoder & { text_decoder: TextDecoder };
  SequenceDecoder: new (config: unknown) => JsDecoder & { decoders: JsDecoder[] };
};

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });
const BYTE_TOKEN = /^<0x[0-9A-Fa-f]{2}>$/;

/**
 * The Rust ByteFallback decoder turns a run of `<0xXX>` tokens that is not valid UTF-8 into one U+FFFD
 * per byte; tokenizers.js' TextDecoder gives one per invalid subsequence and keeps the valid characters.
 */
class RustByteFallbackDecoder extends ByteFallbackDecoder {
  override decode_chain(tokens: string[]): string[] {
    const out: string[] = [];
    let bytes: number[] = [];
    const flush = () => {
      if (bytes.length === 0) return;
      try {
        out.push(STRICT_UTF8.decode(Uint8Array.from(bytes)));
      } catch {
        for (let i = 0; i < bytes.length; i++) out.push("\uFFFD");
      }
      bytes = [];
    };
    for (const token of tokens) {
      if (BYTE_TOKEN.test(token)) {
        bytes.push(parseInt(token.slice(3, 5), 16));
      } else {
        flush();
        out.push(token);
      }
    }
    flush();
    return out;
  }
}

/** Swaps tokenizers.js' ByteFallback decoders (alone or inside a Sequence) for the Rust-exact one. */
function useRustByteFallback(tokenizer: JsTokenizer): void {
  const swap = (d: JsDecoder): JsDecoder => {
    if (d instanceof ByteFallbackDecoder) return new RustByteFallbackDecoder(d.config);
    if (d instanceof SequenceDecoder) d.decoders = d.decoders.map(swap);
    return d;
  };
  const top = tokenizer.decoder;
  if (top === null) return;
  const swapped = swap(top);
  swapped.added_tokens = top.added_tokens;
  swapped.end_of_word_suffix = top.end_of_word_suffix;
  tokenizer.decoder = swapped;
}

// ---------------------------------------------------------------------------------------------------
// PreTrainedTokenizer
// ---------------------------------------------------------------------------------------------------

/** A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json), used as transformers' tokenizers are. */
export class PreTrainedTokenizer {
  /** Id of bos_token, or undefined when the tokenizer has none. */
  readonly bosTokenId: number | undefined;
  /** Id of eos_token, or undefined. */
  readonly eosTokenId: number | undefined;
  /** Id of pad_token, or undefined (then batchEncode cannot pad). */
  readonly padTokenId: number | undefined;
  /** Id of unk_token, or undefined. */
  readonly unkTokenId: number | undefined;
  /** Ids of the named special tokens, then of extra_special_tokens (transformers' all_special_ids). */
  readonly allSpecialIds: readonly number[];
  /** Size of the model vocabulary without added tokens (transformers' vocab_size). */
  readonly vocabSize: number;
  /** model_max_length of the config (1e30 when it gives none, as transformers). */
  readonly modelMaxLength: number;

  private readonly tokenizer: JsTokenizer;
  private readonly specialTokensMap: Record<string, string>;
  private readonly chatTemplates: string | Map<string, string> | undefined;
  private readonly parsedTemplates = new Map<string, Template>();
  private readonly cleanUpSpaces: boolean;
  private readonly paddingSide: "left" | "right";

  /**
   * Builds a tokenizer from parsed files; most code calls {@link PreTrainedTokenizer.fromPretrained}.
   * Throws if tokenizer.json uses a component that @huggingface/tokenizers does not implement.
   * @param tokenizerJson tokenizer.json
   * @param config tokenizer_config.json, with special_tokens_map.json and chat_template.jinja merged in
   * @param name the folder or id, used in error messages
   */
  constructor(tokenizerJson: JsonObject, config: JsonObject, readonly name: string) {
    const json: JsonObject = { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, ...tokenizerJson };
    const named = namedSpecialTokens(config);
    // tokenizer.json's padding section supplies pad token and side when the config has none.
    const padding = json.padding as { pad_token?: string; direction?: string } | null | undefined;
    if (!named.has("pad_token") && padding?.pad_token !== undefined) named.set("pad_token", padding.pad_token);
    const side = config.padding_side ?? (padding?.direction === "Left" ? "left" : "right");
    this.paddingSide = side === "left" ? "left" : "right";

    this.vocabSize = modelVocabSize(json);
    mergeAddedTokens(json, config, named, this.vocabSize);
    // tokenizer.json's post-processor decides about BOS/EOS: transformers 5 ignores the config's
    // add_bos_token/add_eos_token when a tokenizer.json exists. Only the special token strings reach
    // tokenizers.js' config; cleanup and skipping special tokens are decided here.
    try {
      this.tokenizer = new Tokenizer(json, {
        bos_token: named.get("bos_token"),
        eos_token: named.get("eos_token"),
        unk_token: named.get("unk_token"),
        pad_token: named.get("pad_token"),
        clean_up_tokenization_spaces: false,
      });
    } catch (e) {
      throw new Error(`cannot build the tokenizer of ${name} from its tokenizer.json: ${(e as Error).message}`, { cause: e });
    }
    useRustByteFallback(this.tokenizer);

    const idOf = (key: string) => {
      const token = named.get(key);
      return token === undefined ? undefined : this.tokenizer.token_to_id(token);
    };
    this.bosTokenId = idOf("bos_token");
    this.eosTokenId = idOf("eos_token");
    this.padTokenId = idOf("pad_token");
    this.unkTokenId = idOf("unk_token");
    this.allSpecialIds = [...new Set([...named.values(), ...extraSpecialTokens(config)])]
      .map((t) => this.tokenizer.token_to_id(t))
      .filter((id): id is number => id !== undefined);
    this.specialTokensMap = Object.fromEntries(named);
    this.modelMaxLength = typeof config.model_max_length === "number" ? config.model_max_length : VERY_LARGE_INTEGER;
    // transformers skips clean_up_tokenization_spaces for BPE models (it would eat spaces before punctuation).
    this.cleanUpSpaces = config.clean_up_tokenization_spaces === true && (json.model as JsonObject).type !== "BPE";
    this.chatTemplates = parseChatTemplate(config.chat_template);
  }

  /**
   * Loads the tokenizer of a model id or local folder (resolved by the hub layer). Reads tokenizer.json
   * (required), tokenizer_config.json, special_tokens_map.json and chat_template.jinja when present.
   * Throws if tokenizer.json is missing, or any of these files is malformed; the message names the file.
   */
  static async fromPretrained(pathOrId: string, opts: FromPretrainedOptions = {}): Promise<PreTrainedTokenizer> {
    const source = modelSource();
    const dir = await source.resolve(pathOrId, opts);
    const optional = async (file: string) => {
      const text = await source.readText(dir, file, opts);
      return text === undefined ? undefined : parseJsonObject(text, source.filePath(dir, file));
    };
    const tokenizerJson = await optional("tokenizer.json");
    if (!tokenizerJson) {
      throw new Error(`${dir} has no tokenizer.json; tsorch loads tokenizers from tokenizer.json only (the "fast" format)`);
    }
    if (!isObject(tokenizerJson.model)) throw new Error(`${source.filePath(dir, "tokenizer.json")} is malformed: it has no "model" object`);
    const config = (await optional("tokenizer_config.json")) ?? {};
    // As transformers: special_tokens_map.json is read only by configs without added_tokens_decoder.
    const specialTokensMap = config.added_tokens_decoder === undefined ? await optional("special_tokens_map.json") : undefined;
    const chatTemplate = (await source.readText(dir, "chat_template.jinja", opts)) ?? config.chat_template;
    return new PreTrainedTokenizer(tokenizerJson, { ...config, ...specialTokensMap, chat_template: chatTemplate }, dir);
  }

  /** Token ids of a text; addSpecialTokens (default true) applies the post-processor (e.g. a leading BOS). */
  encode(text: string, opts: { addSpecialTokens?: boolean } = {}): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: opts.addSpecialTokens ?? true }).ids;
  }

  /**
   * Text of token ids; skipSpecialTokens (default false) drops special added tokens, as transformers.
   * Ids outside the vocabulary are dropped, as the Rust tokenizer does.
   */
  decode(ids: readonly number[], opts: { skipSpecialTokens?: boolean } = {}): string {
    const known = ids.filter((id) => this.tokenizer.id_to_token(id) !== undefined);
    if (known.length === 0) return "";
    return this.tokenizer.decode(known, {
      skip_special_tokens: opts.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: this.cleanUpSpaces,
    });
  }

  /**
   * Encodes several texts. With padding (default false) every row is padded to the longest with
   * padTokenId on paddingSide (default: the config's padding_side, else "right"); the attention mask
   * is 0 on padding. Throws if padding is needed and the tokenizer has no pad token.
   */
  batchEncode(
    texts: readonly string[],
    opts: { addSpecialTokens?: boolean; padding?: boolean; paddingSide?: "left" | "right" } = {},
  ): BatchEncoding {
    const rows = texts.map((text) => this.encode(text, opts));
    const longest = Math.max(0, ...rows.map((r) => r.length));
    if (!opts.padding || rows.every((r) => r.length === longest)) {
      return { inputIds: rows, attentionMask: rows.map((r) => r.map(() => 1)) };
    }
    const pad = this.padTokenId;
    if (pad === undefined) {
      throw new Error(`tokenizer ${this.name} has no pad token, so batchEncode cannot pad rows of different lengths`);
    }
    const left = (opts.paddingSide ?? this.paddingSide) === "left";
    const padRow = (row: number[], fill: number) => {
      const padding = new Array<number>(longest - row.length).fill(fill);
      return left ? [...padding, ...row] : [...row, ...padding];
    };
    return {
      inputIds: rows.map((r) => padRow(r, pad)),
      attentionMask: rows.map((r) => padRow(r.map(() => 1), 0)),
    };
  }

  /**
   * Renders messages with the tokenizer's chat template (Jinja, as transformers: trim_blocks,
   * lstrip_blocks, raise_exception, tojson) given messages, tools, add_generation_prompt and the special
   * tokens (bos_token, eos_token, …), and by default tokenizes the result without adding special tokens
   * again. Throws if the tokenizer has no chat_template, or the template fails or raises.
   */
  applyChatTemplate(messages: readonly ChatMessage[], opts: ChatTemplateOptions & { tokenize: false }): string;
  applyChatTemplate(messages: readonly ChatMessage[], opts?: ChatTemplateOptions & { tokenize?: true }): number[];
  applyChatTemplate(messages: readonly ChatMessage[], opts?: ChatTemplateOptions): string | number[];
  applyChatTemplate(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): string | number[] {
    if (messages.length === 0) throw new Error("applyChatTemplate needs at least one message");
    const template = this.template(opts.chatTemplate, opts.tools !== undefined);
    const text = template.render({
      ...this.specialTokensMap,
      documents: null,
      ...opts.templateKwargs,
      messages,
      tools: opts.tools ?? null,
      add_generation_prompt: opts.addGenerationPrompt ?? false,
    });
    return opts.tokenize === false ? text : this.encode(text, { addSpecialTokens: false });
  }

  /** The parsed template to render, chosen as transformers' get_chat_template does. */
  private template(requested: string | undefined, withTools: boolean): Template {
    const templates = this.chatTemplates;
    let source: string;
    if (templates instanceof Map) {
      const name = requested ?? (withTools && templates.has("tool_use") ? "tool_use" : "default");
      const named = templates.get(name);
      if (named === undefined && requested === undefined) {
        throw new Error(`tokenizer ${this.name} has several chat templates and none named "default"; pass chatTemplate, one of: ${[...templates.keys()].join(", ")}`);
      }
      source = named ?? name;
    } else if (requested !== undefined) {
      source = requested;
    } else if (templates !== undefined) {
      source = templates;
    } else {
      throw new Error(`tokenizer ${this.name} has no chat_template (in tokenizer_config.json or chat_template.jinja); pass one as chatTemplate`);
    }
    let parsed = this.parsedTemplates.get(source);
    if (parsed === undefined) {
      parsed = new Template(source);
      this.parsedTemplates.set(source, parsed);
    }
    return parsed;
  }
}

/** transformers' AutoTokenizer: every tokenizer.json-based tokenizer loads as a {@link PreTrainedTokenizer}. */
export const AutoTokenizer = { fromPretrained: PreTrainedTokenizer.fromPretrained } as const;
