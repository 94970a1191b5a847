/**
 * Tokenizers: a Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json) behind the API of
 * transformers' PreTrainedTokenizer, camel-cased, giving the ids transformers 5.18's AutoTokenizer gives:
 * - the class AutoTokenizer picks (tokenizer_class.ts) and its load-time rebuild of tokenizer.json
 *   (tokenizer_rewrites.ts), the added tokens and special tokens of the config (tokenizer_config.ts);
 * - encoding as the Rust `tokenizers` crate does it: added tokens split off with their flags
 *   (added_vocabulary.ts), then normalizer and model of @huggingface/tokenizers (tokenizers_js.ts), the
 *   pre-tokenizer (pre_tokenizer.ts) and post-processor (post_processor.ts);
 * - decoding by @huggingface/tokenizers with a Rust-exact ByteFallback decoder;
 * - padding and chat templates, as transformers.
 */
import { Template } from "@huggingface/jinja";
import type { JsonObject } from "../hub/config.js";
import { modelSource, parseJsonObject, type SourceOptions } from "../hub/source.js";
import { AddedVocabulary } from "./added_vocabulary.js";
import { postProcessor, type PostProcessor } from "./post_processor.js";
import { preTokenizer, type PreTokenize } from "./pre_tokenizer.js";
import { tokenizerClass } from "./tokenizer_class.js";
import { clipTokenizerJson } from "./tokenizer_slow_clip.js";
import { extraSpecialContents, isObject, legacyAddedTokensDecoder, mergeAddedTokens, namedSpecialContents, namedSpecialTokens } from "./tokenizer_config.js";
import { rebuildsTokenizer, rewriteTokenizerJson } from "./tokenizer_rewrites.js";
import { jsTokenizer, type JsTokenizer } from "./tokenizers_js.js";

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

/** transformers' VERY_LARGE_INTEGER, the model_max_length of a config that gives none. */
const VERY_LARGE_INTEGER = 1e30;

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
  /** The transformers class AutoTokenizer loads this folder as ("LlamaTokenizer", "TokenizersBackend", …). */
  readonly tokenizerClass: string;

  private readonly tokenizer: JsTokenizer;
  private readonly addedVocabulary: AddedVocabulary;
  private readonly postProcess: PostProcessor;
  private readonly preTokenize: PreTokenize;
  private readonly specialTokensMap: Record<string, string>;
  private readonly chatTemplates: string | Map<string, string> | undefined;
  private readonly parsedTemplates = new Map<string, Template>();
  private readonly cleanUpSpaces: boolean;
  private readonly paddingSide: "left" | "right";

  /**
   * Builds a tokenizer from parsed files; most code calls {@link PreTrainedTokenizer.fromPretrained}.
   * Throws if tokenizer.json uses a component that @huggingface/tokenizers does not implement.
   * @param tokenizerJson tokenizer.json
   * @param tokenizerConfig tokenizer_config.json, with special_tokens_map.json and chat_template.jinja merged in
   * @param name the folder or id, used in error messages
   * @param modelConfig config.json (model_type and tokenizer_class choose the class, as in AutoTokenizer)
   */
  constructor(tokenizerJson: JsonObject, tokenizerConfig: JsonObject, readonly name: string, modelConfig: JsonObject = {}) {
    const str = (v: unknown) => (typeof v === "string" ? v : undefined);
    this.tokenizerClass = tokenizerClass(str(tokenizerConfig.tokenizer_class), str(modelConfig.model_type), str(modelConfig.tokenizer_class));
    const json = rewriteTokenizerJson(this.tokenizerClass, { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, ...tokenizerJson }, tokenizerConfig);
    // tokenizer.json's padding section supplies pad token and side when the config has none.
    const padding = json.padding as { pad_token?: string; direction?: string } | null | undefined;
    const config = { ...tokenizerConfig };
    if (config.pad_token === undefined && padding?.pad_token !== undefined) config.pad_token = padding.pad_token;
    const side = config.padding_side ?? (padding?.direction === "Left" ? "left" : "right");
    this.paddingSide = side === "left" ? "left" : "right";
    const named = namedSpecialContents(namedSpecialTokens(config));

    this.vocabSize = modelVocabSize(json);
    const addedTokens = mergeAddedTokens(json, config, this.vocabSize, this.tokenizerClass, rebuildsTokenizer(this.tokenizerClass));
    // tokenizer.json's post-processor decides about BOS/EOS: transformers 5 drops the config's
    // add_bos_token/add_eos_token when a tokenizer.json exists (tokenization_utils_base._from_pretrained).
    try {
      this.tokenizer = jsTokenizer(
        { ...json, added_tokens: addedTokens },
        { bos_token: named.get("bos_token"), eos_token: named.get("eos_token"), unk_token: named.get("unk_token"), pad_token: named.get("pad_token") },
      );
      this.preTokenize = preTokenizer(json.pre_tokenizer as JsonObject | null);
      this.postProcess = postProcessor(json.post_processor as JsonObject | null);
    } catch (e) {
      throw new Error(`cannot build the tokenizer of ${name} from its tokenizer.json: ${(e as Error).message}`, { cause: e });
    }
    const normalizer = this.tokenizer.normalizer;
    const splitSpecialTokens = config.split_special_tokens === true;
    this.addedVocabulary = new AddedVocabulary(addedTokens, normalizer === null ? null : (text) => normalizer.normalize(text), splitSpecialTokens);

    const idOf = (key: string) => {
      const token = named.get(key);
      return token === undefined ? undefined : this.tokenizer.token_to_id(token);
    };
    this.bosTokenId = idOf("bos_token");
    this.eosTokenId = idOf("eos_token");
    this.padTokenId = idOf("pad_token");
    this.unkTokenId = idOf("unk_token");
    this.allSpecialIds = [...new Set([...named.values(), ...extraSpecialContents(config)])]
      .map((t) => this.tokenizer.token_to_id(t))
      .filter((id): id is number => id !== undefined);
    this.specialTokensMap = Object.fromEntries(named);
    this.modelMaxLength = typeof config.model_max_length === "number" ? config.model_max_length : VERY_LARGE_INTEGER;
    // transformers skips clean_up_tokenization_spaces for BPE models (it would eat spaces before punctuation)
    // unless the config insists.
    const forceForBpe = config.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output === true;
    this.cleanUpSpaces = config.clean_up_tokenization_spaces === true && ((json.model as JsonObject).type !== "BPE" || forceForBpe);
    this.chatTemplates = parseChatTemplate(config.chat_template);
  }

  /**
   * Loads the tokenizer of a model id or local folder (resolved by the hub layer). Reads tokenizer.json
   * (required), tokenizer_config.json, special_tokens_map.json, added_tokens.json, chat_template.jinja and
   * config.json when present.
   * Throws if tokenizer.json is missing, or any of these files is malformed; the message names the file.
   */
  static async fromPretrained(pathOrId: string, opts: FromPretrainedOptions = {}): Promise<PreTrainedTokenizer> {
    const source = modelSource();
    const dir = await source.resolve(pathOrId, opts);
    const optional = async (file: string) => {
      const text = await source.readText(dir, file, opts);
      return text === undefined ? undefined : parseJsonObject(text, source.filePath(dir, file));
    };
    const config = (await optional("tokenizer_config.json")) ?? {};
    let tokenizerJson = await optional("tokenizer.json");
    // A CLIP repo with only the slow files: build the tokenizer.json transformers converts them to.
    const vocab = tokenizerJson || config.tokenizer_class !== "CLIPTokenizer" ? undefined : await optional("vocab.json");
    const merges = vocab && await source.readText(dir, "merges.txt", opts);
    if (vocab && merges !== undefined) tokenizerJson = clipTokenizerJson(vocab, merges, config, dir);
    if (!tokenizerJson) {
      throw new Error(`${dir} has no tokenizer.json; tsorch loads tokenizers from tokenizer.json (the "fast" format), or CLIP's vocab.json + merges.txt`);
    }
    if (!isObject(tokenizerJson.model)) throw new Error(`${source.filePath(dir, "tokenizer.json")} is malformed: it has no "model" object`);
    // As transformers: special_tokens_map.json is read only by configs without added_tokens_decoder.
    const specialTokensMap = config.added_tokens_decoder === undefined ? await optional("special_tokens_map.json") : undefined;
    const merged: JsonObject = { ...config, ...specialTokensMap };
    // ... and so is the older added_tokens.json.
    const addedTokens = config.added_tokens_decoder === undefined ? await optional("added_tokens.json") : undefined;
    if (addedTokens) merged.added_tokens_decoder = legacyAddedTokensDecoder(addedTokens, source.filePath(dir, "added_tokens.json"), merged, tokenizerJson);
    const modelConfig = (await optional("config.json")) ?? {};
    merged.chat_template = (await source.readText(dir, "chat_template.jinja", opts)) ?? config.chat_template;
    return new PreTrainedTokenizer(tokenizerJson, merged, dir, modelConfig);
  }

  /**
   * Token ids of a text, as the Rust tokenizer encodes it: added tokens are split off first (addedVocabulary),
   * each other piece is normalized, pre-tokenized and run through the model, then addSpecialTokens (default
   * true) applies the post-processor (e.g. a leading BOS).
   */
  encode(text: string, opts: { addSpecialTokens?: boolean } = {}): number[] {
    const ids: number[] = [];
    const model = this.tokenizer.model;
    for (const piece of this.addedVocabulary.split(text)) {
      if (piece.id !== undefined) {
        ids.push(piece.id);
        continue;
      }
      for (const token of model(this.preTokenize(piece.text, piece.atStart))) {
        const id = model.tokens_to_ids.get(token) ?? model.unk_token_id;
        if (id !== undefined) ids.push(id);
      }
    }
    return this.postProcess(ids, opts.addSpecialTokens ?? true);
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
