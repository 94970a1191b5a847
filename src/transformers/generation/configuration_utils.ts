/**
 * generate()'s options and how they combine with a checkpoint's generation_config.json, as
 * transformers 5.18 combines them (generation/configuration_utils.py, and GenerationMixin's
 * _prepare_generation_config, _prepare_generated_length and _validate_generated_length):
 * - precedence: an explicit option > generation_config.json > transformers' defaults, per option;
 * - sampling parameters (temperature, topK, topP, minP) are checked only when sampling;
 * - length: maxNewTokens (from either source) wins over maxLength (prompt + new tokens); with
 *   neither set, maxLength = prompt + 20, capped at max_position_embeddings; a prompt already at
 *   maxLength is refused. Rotary models are otherwise not capped at max_position_embeddings;
 *   learned position embeddings (GPT-2's n_positions) are a hard limit.
 * Errors name the option as the caller spelled it (API option or CLI flag, see OptionLabels) or,
 * for a value read from the file, `generation_config.json <key>`.
 */
import type { CacheImplementation } from "../cache_utils.js";

/** A tokenizer, as stop strings need it. */
export interface GenerationTokenizer {
  decode(ids: number[], opts?: { skipSpecialTokens?: boolean }): string;
}

/** generate() options; unset fields fall back to generation_config.json, then transformers' defaults. */
export interface GenerationOptions {
  /** New tokens to generate at most (positive). Beats maxLength, as in transformers. */
  maxNewTokens?: number;
  /** Prompt + new tokens at most; used when maxNewTokens is set nowhere. */
  maxLength?: number;
  doSample?: boolean;
  /** Sampling only: logits / temperature, > 0. */
  temperature?: number;
  /** Sampling only: keep the k best tokens (0 = off). Default 50, as transformers' GenerationConfig. */
  topK?: number;
  /** Sampling only: nucleus mass in [0, 1) (>= 1 = off). */
  topP?: number;
  /** Sampling only: drop tokens below minP × the top probability, in [0, 1]. */
  minP?: number;
  repetitionPenalty?: number;
  /** Ids that end a sequence ([] = none). */
  eosTokenId?: number | number[];
  /** Filler for rows that finished while others go on. */
  padTokenId?: number;
  /** Stop when the text ends inside one of these strings (needs `tokenizer`). */
  stopStrings?: string | string[];
  tokenizer?: GenerationTokenizer;
  /** Seed of the sampling RNG (default: from crypto.getRandomValues). */
  seed?: number;
  cacheImplementation?: CacheImplementation;
  /** What the KV cache stores keys and values as: default the model's dtype (`model.dtype`: bfloat16
   * for a bfloat16 checkpoint, as transformers); "float32" keeps full precision at twice the memory. */
  cacheDtype?: "float32" | "float16" | "bfloat16";
  /** 1 = token, 0 = padding, for a left-padded batch [B][L]. */
  attentionMask?: number[][];
  /**
   * Run prefill and decode as graph-ready steps on a static KV cache (generation/static_steps.ts):
   * true compiles them (torch.compile); "eager" runs the same steps op by op (torch.compile's
   * backend="eager", for debugging). A model without such a step generates eagerly, saying why once.
   */
  compile?: boolean | "eager";
  /** generate() returns { sequences, finishReason } instead of the sequences (transformers' return_dict_in_generate). */
  returnDictInGenerate?: boolean;
}

/** Why a sequence stopped: an EOS id, a stop string, or its token budget (maxNewTokens / maxLength). */
export type FinishReason = "eos" | "stop_string" | "length";

/** How error messages name each option (default: the API's camelCase name; the CLI passes its flags). */
export type OptionLabels = Partial<Record<keyof GenerationOptions, string>>;

/** A bad generation option. `explicit`: the caller's value (else generation_config.json's) is at fault. */
export class GenerationOptionError extends RangeError {
  constructor(message: string, readonly option: keyof GenerationOptions, readonly explicit: boolean) {
    super(message);
  }
}

/** The settings one generate() call runs with. */
export interface GenerationConfig {
  maxNewTokens?: number;
  maxLength?: number;
  doSample: boolean;
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  repetitionPenalty: number;
  eos: number[];
  pad: number;
  stopStrings: string[];
  cacheImplementation: CacheImplementation;
  /** How messages name the option that set maxNewTokens / maxLength, and the caller's name for maxNewTokens. */
  labels: { maxNewTokens: string; maxLength: string; setMaxNewTokens: string };
}

type Check = (v: unknown) => string | undefined;
const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);
const isNum = (v: unknown): v is number => typeof v === "number" && !Number.isNaN(v);
const positiveInt: Check = (v) => (isInt(v) && v > 0 ? undefined : "must be a positive integer");
const tokenId: Check = (v) => (isInt(v) && v >= 0 ? undefined : "must be a non-negative integer token id");
const bool: Check = (v) => (typeof v === "boolean" ? undefined : "must be true or false");

interface Spec {
  /** The generation_config.json key, when the file may set it. */
  gc?: string;
  /** Used (and checked) only when sampling. */
  sampling?: boolean;
  check?: Check;
}

/** Every option, with its generation_config.json key and its rule (transformers' logits processors' checks). */
const SPECS: Record<keyof GenerationOptions, Spec> = {
  maxNewTokens: { gc: "max_new_tokens", check: positiveInt },
  maxLength: { gc: "max_length", check: positiveInt },
  doSample: { gc: "do_sample", check: bool },
  temperature: { gc: "temperature", sampling: true, check: (v) => (isNum(v) && v > 0 ? undefined : "must be a strictly positive number when sampling (for greedy decoding, do not sample)") },
  topK: { gc: "top_k", sampling: true, check: (v) => (isInt(v) && v >= 0 ? undefined : "must be a non-negative integer (0 = off)") },
  topP: { gc: "top_p", sampling: true, check: (v) => (isNum(v) && v >= 0 && v <= 1 ? undefined : "must be a number in [0, 1] (1 = off)") },
  minP: { gc: "min_p", sampling: true, check: (v) => (isNum(v) && v >= 0 && v <= 1 ? undefined : "must be a number in [0, 1]") },
  repetitionPenalty: { gc: "repetition_penalty", check: (v) => (isNum(v) && v > 0 ? undefined : "must be a strictly positive number") },
  eosTokenId: { gc: "eos_token_id", check: (v) => (Array.isArray(v) ? v.map(tokenId).find(Boolean) : tokenId(v)) && "must be a token id or a list of token ids" },
  padTokenId: { gc: "pad_token_id", check: tokenId },
  stopStrings: {
    gc: "stop_strings",
    check: (v) => ([v].flat().every((s) => typeof s === "string" && s !== "") ? undefined : "must be a non-empty string or a list of non-empty strings"),
  },
  tokenizer: { check: (v) => (typeof (v as GenerationTokenizer)?.decode === "function" ? undefined : "must be a tokenizer (an object with decode)") },
  seed: { check: (v) => (Number.isSafeInteger(v) ? undefined : "must be an integer") },
  cacheImplementation: { gc: "cache_implementation", check: (v) => (v === "dynamic" || v === "static" ? undefined : "must be 'dynamic' or 'static'") },
  cacheDtype: { check: (v) => (v === "float32" || v === "float16" || v === "bfloat16" ? undefined : "must be 'float32', 'float16' or 'bfloat16'") },
  attentionMask: {},
  compile: { check: (v) => (v === true || v === false || v === "eager" ? undefined : "must be true, false or 'eager'") },
  returnDictInGenerate: { check: bool },
};

/** transformers' GenerationConfig defaults for the options a file may leave unset. */
const DEFAULTS = { doSample: false, temperature: 1, topK: 50, topP: 1, minP: 0, repetitionPenalty: 1, cacheImplementation: "dynamic" } as const;

/** transformers' default number of new tokens when no length is set (its max_length 20, added to the prompt). */
const DEFAULT_NEW_TOKENS = 20;

/** The name in `candidates` closest to `name` (ignoring case, '-' and '_'; else by edit distance), if any is close. */
export function closestName(name: string, candidates: readonly string[]): string | undefined {
  const norm = (s: string) => s.toLowerCase().replace(/[-_]/g, "");
  const exact = candidates.find((c) => norm(c) === norm(name));
  if (exact) return exact;
  let best: string | undefined, bestD = Math.max(2, Math.floor(name.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(norm(name), norm(c));
    if (d < bestD) [best, bestD] = [c, d];
  }
  return best;
}

/** Levenshtein distance (insertions, deletions, substitutions). */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/**
 * Throw a TypeError naming the closest valid option when `o` has a key `what` does not take (e.g.
 * `dtyp` for `dtype`): an option no loader reads would otherwise be ignored without a word.
 */
export function checkKnownOptions(what: string, o: object, valid: readonly string[]): void {
  for (const key of Object.keys(o)) {
    if (valid.includes(key)) continue;
    const near = closestName(key, valid);
    throw new TypeError(`${what}: unknown option '${key}'; ${near ? `did you mean '${near}'?` : `valid options: ${valid.join(", ")}`}`);
  }
}

/** Throw naming the closest valid option when `o` has a key generate() does not know (e.g. `max_new_tokens`). */
export function checkOptionNames(o: object): void {
  const valid = Object.keys(SPECS);
  for (const key of Object.keys(o)) {
    if (key in SPECS) continue;
    const near = closestName(key, valid);
    throw new TypeError(`unknown generate option '${key}'; ${near ? `did you mean '${near}'?` : `valid options: ${valid.join(", ")}`}`);
  }
}

/**
 * Resolve the options of one generate() call against generation_config.json (`gc`, snake_case as
 * stored) and the model's config.json (`modelConfig`, for eos_token_id / pad_token_id). Throws
 * TypeError for an unknown option name, GenerationOptionError for a bad value (named by `labels`).
 */
export function resolveGenerationConfig(gc: Record<string, unknown>, modelConfig: Record<string, unknown>, o: GenerationOptions, labels: OptionLabels = {}): GenerationConfig {
  if (typeof o !== "object" || o === null) throw new TypeError("generate options must be an object");
  checkOptionNames(o);
  const explicit = (key: keyof GenerationOptions) => o[key] !== undefined && o[key] !== null;
  const label = (key: keyof GenerationOptions) => (explicit(key) ? labels[key] ?? key : `generation_config.json ${SPECS[key].gc}`);
  const raw = (key: keyof GenerationOptions): unknown => (explicit(key) ? o[key] : SPECS[key].gc ? gc[SPECS[key].gc!] ?? undefined : undefined);
  const fail = (key: keyof GenerationOptions, problem: string, v: unknown): never => {
    throw new GenerationOptionError(`${label(key)} ${problem}, got ${JSON.stringify(v)}`, key, explicit(key));
  };
  const check = (key: keyof GenerationOptions) => {
    const v = raw(key);
    const problem = v === undefined ? undefined : SPECS[key].check?.(v);
    if (problem) fail(key, problem, v);
  };
  check("doSample");
  const doSample = (raw("doSample") as boolean | undefined) ?? DEFAULTS.doSample;
  for (const key of Object.keys(SPECS) as (keyof GenerationOptions)[]) {
    if (key === "doSample" || (SPECS[key].sampling && !doSample) || (key === "cacheImplementation" && !explicit(key))) continue;
    check(key);
  }
  const pick = <K extends keyof typeof DEFAULTS>(key: K) => (raw(key) as (typeof DEFAULTS)[K] | undefined) ?? DEFAULTS[key];
  const toList = (v: unknown): number[] => (v === undefined || v === null ? [] : [v as number | number[]].flat());
  const eos = toList(raw("eosTokenId") ?? modelConfig.eos_token_id);
  // A file's cache_implementation that tsorch lacks ("hybrid", "offloaded", …) gives the dynamic cache:
  // the cache changes memory use, never the tokens.
  const cacheImplementation = (explicit("cacheImplementation") || gc.cache_implementation === "static"
    ? raw("cacheImplementation") : DEFAULTS.cacheImplementation) as CacheImplementation;
  const stopStrings = [(raw("stopStrings") as string | string[] | undefined) ?? []].flat();
  if (stopStrings.length && !o.tokenizer) {
    throw new GenerationOptionError(`${label("stopStrings")} needs a tokenizer: pass { tokenizer } to generate`, "stopStrings", explicit("stopStrings"));
  }
  return {
    maxNewTokens: raw("maxNewTokens") as number | undefined,
    maxLength: raw("maxLength") as number | undefined,
    doSample,
    temperature: pick("temperature"),
    topK: pick("topK"),
    topP: pick("topP"),
    minP: pick("minP"),
    repetitionPenalty: pick("repetitionPenalty"),
    eos,
    pad: (raw("padTokenId") as number | undefined) ?? (modelConfig.pad_token_id as number | undefined) ?? eos[0] ?? 0,
    stopStrings,
    cacheImplementation,
    labels: { maxNewTokens: label("maxNewTokens"), maxLength: label("maxLength"), setMaxNewTokens: labels.maxNewTokens ?? "maxNewTokens" },
  };
}

/** What the length rules need to know about the model. */
export interface LengthLimits {
  /** config max_position_embeddings (caps only the default length), if the config has one. */
  maxPositions?: number;
  /** Positions the model can embed at all (learned position embeddings); undefined = no limit. */
  positionLimit?: number;
  /** The model's class name, for messages. */
  name: string;
}

/**
 * The number of new tokens one generate() call may produce for prompts of `promptLength` tokens
 * (transformers' _prepare_generated_length + _validate_generated_length). Throws a RangeError
 * when nothing can be generated, and, for learned position embeddings, when the prompt plus the
 * new tokens need more positions than the model has (transformers fails there mid-generation with
 * an index error; a sequence's last token needs no position of its own).
 */
export function newTokenBudget(cfg: GenerationConfig, promptLength: number, model: LengthLimits): number {
  const L = promptLength;
  let budget: number;
  if (cfg.maxNewTokens !== undefined) budget = cfg.maxNewTokens;
  else if (cfg.maxLength !== undefined) {
    if (L >= cfg.maxLength) {
      throw new RangeError(`the prompt has ${L} tokens but ${cfg.labels.maxLength} is ${cfg.maxLength} (prompt + new tokens), so no token can be generated; raise it or set ${cfg.labels.setMaxNewTokens}`);
    }
    budget = cfg.maxLength - L;
  } else {
    const maxLength = Math.min(L + DEFAULT_NEW_TOKENS, model.maxPositions ?? Infinity);
    if (L >= maxLength) {
      throw new RangeError(`the prompt has ${L} tokens, and with no length set the limit is max_position_embeddings (${maxLength}), as in transformers; set ${cfg.labels.setMaxNewTokens}`);
    }
    budget = maxLength - L;
  }
  const P = model.positionLimit;
  if (P !== undefined && L + budget - 1 > P) {
    throw new RangeError(L > P
      ? `the prompt has ${L} tokens, more than the ${P} positions of ${model.name}'s learned position embeddings (n_positions)`
      : `${model.name} has learned position embeddings for ${P} positions (n_positions): a ${L}-token prompt leaves room for at most ${P + 1 - L} new tokens, but ${budget} were asked for`);
  }
  return budget;
}
