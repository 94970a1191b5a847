/**
 * The cases of test/data/generation_reference.json (transformers' generate() on ../shared
 * checkpoints whose config.json / generation_config.json a case overrides), and the model folders
 * they run on, rebuilt under /tmp as generation_reference.py built them.
 */
import { copyFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import type { FinishReason, GenerationOptions } from "../../src/transformers/index.js";
import { missing, readJson, ROOT, STORIES, TINY } from "./shared.js";
import { tempDir } from "./temp_dir.js";

export interface GenerationCase {
  name: string;
  model: "stories260K" | "gpt2";
  config: Record<string, unknown>;
  generation_config: Record<string, unknown>;
  prompt: number[] | number[][];
  attention_mask: number[][] | null;
  /** transformers' generate() keyword arguments. */
  kwargs: Record<string, unknown>;
  /** Whether the tokenizer was passed (stop strings). */
  tokenizer: boolean;
  /** The error transformers raised, or else the new ids (cut after EOS), the padded batch and why each row ended. */
  error?: string;
  new_ids?: number[] | number[][];
  padded?: number[][] | null;
  finish_reason?: FinishReason | FinishReason[];
}

export const SOURCES = { stories260K: STORIES, gpt2: path.join(TINY, "gpt2") };

export function generationCases(): GenerationCase[] {
  return readJson(path.join(ROOT, "test/data/generation_reference.json")).cases;
}

/** A copy of the case's checkpoint (weights linked) with its config.json / generation_config.json overrides. */
export function caseModelDir(c: GenerationCase): string {
  const src = SOURCES[c.model];
  const absent = missing(src); // callers skip first; this guards a direct use
  if (absent) throw new Error(absent);
  const dir = tempDir("tsorch-gencase-");
  for (const f of readdirSync(src)) {
    if (f === "expected.json") continue;
    if (f.endsWith(".safetensors")) symlinkSync(path.join(src, f), path.join(dir, f));
    else copyFileSync(path.join(src, f), path.join(dir, f));
  }
  for (const [file, extra] of [["config.json", c.config], ["generation_config.json", c.generation_config]] as const) {
    const p = path.join(dir, file);
    let data: Record<string, unknown> = {};
    try { data = readJson(p); } catch { /* the checkpoint has none */ }
    writeFileSync(p, JSON.stringify({ ...data, ...extra }));
  }
  return dir;
}

/** transformers' keyword → tsorch's generate option and CLI flag (undefined: the CLI has none). */
const NAMES: Record<string, [keyof GenerationOptions, string | undefined]> = {
  max_new_tokens: ["maxNewTokens", "--max-new-tokens"],
  max_length: ["maxLength", "--max-length"],
  do_sample: ["doSample", "--do-sample"],
  temperature: ["temperature", "--temperature"],
  top_k: ["topK", "--top-k"],
  top_p: ["topP", "--top-p"],
  min_p: ["minP", "--min-p"],
  repetition_penalty: ["repetitionPenalty", "--repetition-penalty"],
  eos_token_id: ["eosTokenId", undefined],
  pad_token_id: ["padTokenId", undefined],
  stop_strings: ["stopStrings", "--stop"],
};

export function apiOptions(kwargs: Record<string, unknown>): GenerationOptions {
  return Object.fromEntries(Object.entries(kwargs).map(([k, v]) => [NAMES[k][0], v]));
}

/** The case's kwargs as CLI flags, or undefined when one has no flag. */
export function cliFlags(kwargs: Record<string, unknown>): string[] | undefined {
  const out: string[] = [];
  for (const [k, v] of Object.entries(kwargs)) {
    const flag = NAMES[k][1];
    if (!flag) return undefined;
    for (const x of [v].flat()) out.push(flag, String(x));
  }
  return out;
}

/**
 * What tsorch's refusal of an error case must say: the option at fault, named as the caller named
 * it (`label(apiName, gcKey)` gives the API option or flag when the case passed it explicitly).
 */
export function expectedError(c: GenerationCase, label: (option: keyof GenerationOptions) => string): RegExp {
  const e = c.error!;
  const named = (kw: string, option: keyof GenerationOptions) =>
    new RegExp(`${escape(kw in c.kwargs ? label(option) : `generation_config.json ${kw}`)} must`);
  if (e.includes("but `max_length` is set to")) return /the prompt has \d+ tokens.* (max_length|max_position_embeddings)/;
  if (e.includes("`temperature`")) return named("temperature", "temperature");
  if (e.includes("`top_k`")) return named("top_k", "topK");
  if (e.includes("`top_p`")) return named("top_p", "topP");
  if (e.includes("`min_p`")) return named("min_p", "minP");
  if (e.includes("`penalty`")) return named("repetition_penalty", "repetitionPenalty");
  if (e.includes("`max_new_tokens`")) return named("max_new_tokens", "maxNewTokens");
  if (e.startsWith("IndexError")) return /learned position embeddings.*\(n_positions\)/;
  throw new Error(`no expected message for transformers' error: ${e}`);
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
