/**
 * `tsorch generate` and `tsorch forward`: load a model (folder or Hub id) and generate text,
 * streaming it to stdout, or print logits / token ids as JSON for scripting.
 */
import { deviceTypes } from "../devices/registry.js";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { loadConfig, loadGenerationConfig, resolveModel } from "../hub/index.js";
import { AutoModelForCausalLM } from "../transformers/index.js";
import { DecodeStream } from "../transformers/decode_stream.js";
import {
  GenerationOptionError, resolveGenerationConfig, type FinishReason, type GenerationOptions, type OptionLabels,
} from "../transformers/generation/configuration_utils.js";
import { generateStream } from "../transformers/generation/utils.js";
import { PreTrainedTokenizer } from "../transformers/index.js";
import type { PreTrainedModel } from "../transformers/modeling_utils.js";
import { numberFlag, parseFlags, parseIdLists, UsageError } from "./args.js";
import { kernelizeFromFlags } from "./kernels.js";

const MODEL_FLAGS = {
  model: { type: "string" }, device: { type: "string" }, dtype: { type: "string" },
  "input-ids": { type: "string" }, output: { type: "string" }, revision: { type: "string" },
  kernel: { type: "string", multiple: true },
} as const;

export const GENERATE_USAGE = `usage: tsorch generate --model DIR_OR_HUB_ID [--prompt TEXT | --input-ids 1,2,3[;4,5,6]] [options]
  --max-new-tokens N   new tokens at most
  --max-length N       prompt + new tokens at most (used when max-new-tokens is set nowhere)
  --do-sample [true|false] --temperature T --top-k K --top-p P --min-p P --repetition-penalty R --seed S
  --stop STRING        stop string (repeatable)
  --chat               apply the tokenizer's chat template to the prompt
  --cache static|dynamic
  --compile            run prefill and decode compiled on a static KV cache (same output; README "Compiled generation")
  --device cpu|webgpu  --dtype float32|bfloat16|float16|int8|int4|auto
  --output text|json   json prints {"new_token_ids": [...], "text": "...", "finish_reason": "eos|stop_string|length"}
  --kernel LAYER=DIR_OR_REPO[@version]   swap a layer's forward for a hub kernel (repeatable; README "Kernels")
Unset options come from the model's generation_config.json, then transformers' defaults (length:
prompt + 20 tokens, at most max_position_embeddings). The prompt is read from stdin when --prompt
and --input-ids are absent.`;

export const FORWARD_USAGE = `usage: tsorch forward --model DIR_OR_HUB_ID --input-ids 1,2,3[;4,5,6] [--device D] [--dtype T] --output json
Prints {"logits": [[...], ...]}: the logits of every position (one level deeper for several sequences).`;

const WEIGHT_DTYPES = ["auto", "float32", "bfloat16", "float16", "int8", "int4"];

/** --dtype and --device checked before anything loads (usage errors, exit 2). */
function checkModelFlags(values: Record<string, unknown>): void {
  const dtype = values.dtype as string | undefined;
  if (dtype !== undefined && !WEIGHT_DTYPES.includes(dtype)) throw new UsageError(`--dtype must be one of ${WEIGHT_DTYPES.join(", ")}, got '${dtype}'`);
  const device = values.device as string | undefined;
  if (device !== undefined && !deviceTypes().includes(device.split(":")[0])) throw new UsageError(`--device: unknown device '${device}'; available: ${deviceTypes().join(", ")}`);
}

function checkOutput(v: unknown): "text" | "json" {
  if (v === undefined || v === "text" || v === "json") return (v ?? "text") as "text" | "json";
  throw new UsageError(`--output must be text or json, got '${v}'`);
}

/** Resolve and load the model; `beforeWeights(dir)` runs once the folder is there, before the weights load. */
async function loadModel(values: Record<string, unknown>, beforeWeights?: (dir: string) => Promise<void>): Promise<{ model: PreTrainedModel; dir: string }> {
  if (typeof values.model !== "string") throw new UsageError("--model is required (a folder or a Hub id such as org/name)");
  checkModelFlags(values);
  const dir = await resolveModel(values.model, { revision: values.revision as string | undefined });
  await beforeWeights?.(dir);
  const model = await AutoModelForCausalLM.fromPretrained(dir, { device: values.device as string | undefined, dtype: values.dtype as string | undefined });
  if (values.kernel) await kernelizeFromFlags(model, values.kernel as string[], String(values.device ?? "cpu").split(":")[0]);
  return { model, dir };
}

async function loadTokenizer(dir: string, required: boolean): Promise<PreTrainedTokenizer | undefined> {
  if (!required && !existsSync(path.join(dir, "tokenizer.json"))) return undefined;
  return PreTrainedTokenizer.fromPretrained(dir);
}

/** Left-pad sequences of different lengths; returns ids and the attention mask. */
function leftPad(rows: number[][], pad: number): { ids: number[][]; mask: number[][] } {
  const L = Math.max(...rows.map((r) => r.length));
  return {
    ids: rows.map((r) => [...new Array(L - r.length).fill(pad), ...r]),
    mask: rows.map((r) => [...new Array(L - r.length).fill(0), ...r.map(() => 1)]),
  };
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) throw new UsageError("no prompt: pass --prompt TEXT, --input-ids, or pipe text on stdin");
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8").replace(/\n$/, "");
}

/** The CLI flag of each generate option, for error messages. */
const FLAGS: OptionLabels = {
  maxNewTokens: "--max-new-tokens", maxLength: "--max-length", doSample: "--do-sample", temperature: "--temperature",
  topK: "--top-k", topP: "--top-p", minP: "--min-p", repetitionPenalty: "--repetition-penalty", seed: "--seed",
  stopStrings: "--stop", cacheImplementation: "--cache", compile: "--compile",
};

/**
 * Check the generate flags against the model's generation_config.json and config.json (sampling
 * flags only when sampling): a bad flag is a UsageError naming it; a bad file value, an Error.
 */
function checkFlags(flags: GenerationOptions, gc: Record<string, unknown>, config: Record<string, unknown>): void {
  try {
    // A stand-in tokenizer: whether one exists is known only once the model folder is there.
    resolveGenerationConfig(gc, config, { ...flags, tokenizer: { decode: () => "" } }, FLAGS);
  } catch (e) {
    if (e instanceof GenerationOptionError && e.explicit) throw new UsageError(e.message);
    throw e;
  }
}

export async function generateCommand(argv: string[]): Promise<void> {
  const v = parseFlags(argv, {
    ...MODEL_FLAGS,
    prompt: { type: "string" }, "max-new-tokens": { type: "string" }, "max-length": { type: "string" }, "do-sample": { type: "boolean" },
    temperature: { type: "string" }, "top-k": { type: "string" }, "top-p": { type: "string" }, "min-p": { type: "string" },
    "repetition-penalty": { type: "string" }, seed: { type: "string" }, stop: { type: "string", multiple: true },
    chat: { type: "boolean" }, cache: { type: "string" }, compile: { type: "boolean" },
  });
  const output = checkOutput(v.output);
  if (v.prompt !== undefined && v["input-ids"] !== undefined) throw new UsageError("pass either --prompt or --input-ids, not both");
  const flags: GenerationOptions = {
    maxNewTokens: numberFlag(v, "max-new-tokens", true),
    maxLength: numberFlag(v, "max-length", true),
    doSample: v["do-sample"] as boolean | undefined,
    temperature: numberFlag(v, "temperature"),
    topK: numberFlag(v, "top-k", true),
    topP: numberFlag(v, "top-p"),
    minP: numberFlag(v, "min-p"),
    repetitionPenalty: numberFlag(v, "repetition-penalty"),
    seed: numberFlag(v, "seed", true),
    stopStrings: v.stop as string[] | undefined,
    cacheImplementation: v.cache as "static" | "dynamic" | undefined,
    compile: v.compile as boolean | undefined,
  };
  for (const key of Object.keys(flags) as (keyof GenerationOptions)[]) if (flags[key] === undefined) delete flags[key];
  const rowsById = typeof v["input-ids"] === "string" ? parseIdLists(v["input-ids"]) : undefined;
  checkFlags(flags, {}, {}); // before anything loads: each flag alone (sampling flags when --do-sample is on)
  const { model, dir } = await loadModel(v, async (folder) => checkFlags(flags, await loadGenerationConfig(folder), await loadConfig(folder)));
  const tokenizer = await loadTokenizer(dir, !rowsById);

  let rows: number[][];
  if (rowsById) rows = rowsById;
  else {
    const prompt = typeof v.prompt === "string" ? v.prompt : await readStdin();
    rows = [v.chat
      ? (tokenizer!.applyChatTemplate([{ role: "user", content: prompt }], { addGenerationPrompt: true, tokenize: true }) as number[])
      : tokenizer!.encode(prompt)];
  }
  const pad = (model.generationConfig.pad_token_id ?? model.config.pad_token_id ?? 0) as number;
  const { ids, mask } = leftPad(rows, pad);
  const opts: GenerationOptions = { ...flags, ...(tokenizer && { tokenizer }), ...(rows.length > 1 && { attentionMask: mask }) };

  const fresh: number[][] = ids.map(() => []);
  const stream = output === "text" && tokenizer && rows.length === 1
    ? new DecodeStream(tokenizer, { skipSpecialTokens: true })
    : undefined;
  const steps = generateStream(model, model.generationConfig, ids, opts, FLAGS); // validates before anything is printed
  const running = ids.map(() => true);
  if (stream) process.stdout.write(stream.put(ids[0]));
  for await (const step of steps) {
    step.forEach((t, b) => {
      if (running[b]) fresh[b].push(t);
      running[b] = !steps.finishReasons[b];
    });
    if (stream) process.stdout.write(stream.put(step[0]));
  }
  if (stream) {
    process.stdout.write(stream.end() + "\n");
    return;
  }
  const texts = fresh.map((f) => (tokenizer ? tokenizer.decode(f, { skipSpecialTokens: true }) : null));
  if (output === "json") {
    const one = rows.length === 1;
    const reasons = steps.finishReasons as FinishReason[];
    process.stdout.write(JSON.stringify({ new_token_ids: one ? fresh[0] : fresh, text: one ? texts[0] : texts, finish_reason: one ? reasons[0] : reasons }) + "\n");
  } else {
    process.stdout.write(texts.map((t, b) => t ?? fresh[b].join(",")).join("\n") + "\n");
  }
}

export async function forwardCommand(argv: string[]): Promise<void> {
  const v = parseFlags(argv, MODEL_FLAGS);
  if (checkOutput(v.output ?? "json") !== "json") throw new UsageError("tsorch forward supports only --output json");
  if (typeof v["input-ids"] !== "string") throw new UsageError("--input-ids is required, e.g. --input-ids 1,2,3");
  const rows = parseIdLists(v["input-ids"]);
  const { model } = await loadModel(v);
  const pad = (model.config.pad_token_id ?? 0) as number;
  const { ids, mask } = leftPad(rows, pad);
  const L = ids[0].length;
  const limit = model.positionLimit;
  if (limit !== undefined && L > limit) throw new RangeError(`input has ${L} tokens, more than the ${limit} positions of ${model.constructor.name}'s learned position embeddings (n_positions)`);
  const logits = model.logits(ids, rows.length > 1 ? mask : undefined);
  const data = (await logits.data()) as Float32Array;
  const V = logits.shape[2];
  const rowsOut = ids.map((_, b) => Array.from({ length: L }, (_, l) => Array.from(data.subarray((b * L + l) * V, (b * L + l + 1) * V))));
  process.stdout.write(JSON.stringify({ logits: rows.length === 1 ? rowsOut[0] : rowsOut }) + "\n");
}
