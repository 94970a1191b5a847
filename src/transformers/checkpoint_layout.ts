/**
 * Checkpoint layouts: how a family's Hub files name their tensors, mapped onto the module tree of
 * the text model tsorch builds (transformers' key mapping / checkpoint conversion in
 * modeling_utils.py and conversion_mapping.py, reduced to what text generation needs):
 * - `renames`: prefix renames, e.g. the `…ForConditionalGeneration` wrappers store the language
 *   model under `model.language_model.`, which the text model calls `model.`;
 * - `skip`: tensors the text model knowingly does not use (vision/audio towers, multi-token
 *   prediction layers), by prefix or by name. They are dropped before the missing/unexpected-weight
 *   checks and listed once, summarised by prefix, in a debug line (TSORCH_DEBUG=1);
 * - `fuseExperts`: per-expert 2-D tensors `…experts.N.{gate,up,down}_proj.weight` (what
 *   transformers' save_pretrained writes) are stacked into the fused 3-D `…experts.gate_up_proj`
 *   [E, 2I, H] and `…experts.down_proj` [E, H, I] that the model declares (what Qwen and Google ship).
 */
import { debug } from "./debug.js";
import type { RawTensor } from "../hub/index.js";
import { itemsize } from "../tensor/dtype.js";
import { ConfigError, type RawConfig } from "./configuration.js";
import { WeightLoadError } from "./modeling_utils.js";

export interface CheckpointLayout {
  /** [from, to] prefix renames; the first matching one applies. */
  renames?: [string, string][];
  /** Checkpoint tensors to drop (checked on the original names): a string is a name prefix. */
  skip?: (string | RegExp)[];
  /** Stack per-expert `experts.N.{gate,up,down}_proj.weight` into fused 3-D expert tensors. */
  fuseExperts?: boolean;
}

/** Where `…ForConditionalGeneration` checkpoints keep the language model, and the text model's name for it. */
export const LANGUAGE_MODEL_RENAME: [string, string] = ["model.language_model.", "model."];

/**
 * The text config of a `…ForConditionalGeneration` config.json: its `text_config`, with the
 * wrapper's `architectures` and, when the wrapper sets it, its `tie_word_embeddings` (the wrapper
 * class owns lm_head). Throws ConfigError when `text_config` is missing.
 */
export function wrappedTextConfig(raw: RawConfig): RawConfig {
  const text = raw.text_config;
  if (!text || typeof text !== "object") throw new ConfigError(`config.json of ${raw.architectures ?? raw.model_type} has no 'text_config' object`);
  const out: RawConfig = { ...(text as RawConfig), architectures: raw.architectures };
  if (typeof raw.tie_word_embeddings === "boolean") out.tie_word_embeddings = raw.tie_word_embeddings;
  return out;
}

/**
 * Apply `layout` to a checkpoint (name -> tensor): drop skipped tensors, fuse split experts and
 * rename prefixes (in that order, so errors name the checkpoint's own tensors). Returns the new map.
 * Logs one debug line listing the skipped tensors by prefix, for `model` (a class name). Throws
 * WeightLoadError when split experts are incomplete or of mixed dtype/shape.
 */
export function applyCheckpointLayout(weights: Map<string, RawTensor>, layout: CheckpointLayout | null, model: string): Map<string, RawTensor> {
  if (!layout) return weights;
  const kept = new Map<string, RawTensor>();
  const skipped: string[] = [];
  for (const [name, t] of weights) {
    if (layout.skip?.some((s) => (typeof s === "string" ? name.startsWith(s) : s.test(name)))) skipped.push(name);
    else kept.set(name, t);
  }
  if (skipped.length) debug(`${model}: skipped ${skipped.length} checkpoint tensor(s) text generation does not use: ${summarise(skipped)}`);
  const out = new Map<string, RawTensor>();
  for (const [name, t] of layout.fuseExperts ? fuseSplitExperts(kept) : kept) {
    const rule = layout.renames?.find(([from]) => name.startsWith(from));
    const renamed = rule ? rule[1] + name.slice(rule[0].length) : name;
    out.set(renamed, renamed === name ? t : { ...t, name: renamed });
  }
  return out;
}

/** "model.visual.* (12), mtp.* (3)": skipped names grouped by their first two name parts. */
function summarise(names: string[]): string {
  const groups = new Map<string, number>();
  for (const n of names) {
    const key = n.split(".").slice(0, 2).join(".") + ".*";
    groups.set(key, (groups.get(key) ?? 0) + 1);
  }
  return [...groups].map(([k, n]) => `${k} (${n})`).join(", ");
}

const SPLIT_EXPERT = /^(.*\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$/;

/**
 * Stack split experts: for each `<p>.experts`, gate_up_proj [E, 2I, H] holds per expert the gate
 * rows then the up rows, down_proj [E, H, I] the down matrices (the bytes are concatenated once).
 */
function fuseSplitExperts(weights: Map<string, RawTensor>): Map<string, RawTensor> {
  const groups = new Map<string, Map<string, RawTensor>>();
  const out = new Map<string, RawTensor>();
  for (const [name, t] of weights) {
    const m = SPLIT_EXPERT.exec(name);
    if (!m) {
      out.set(name, t);
      continue;
    }
    if (!groups.has(m[1])) groups.set(m[1], new Map());
    groups.get(m[1])!.set(`${m[3]}.${m[2]}`, t);
  }
  for (const [prefix, parts] of groups) {
    const E = Math.max(...[...parts.keys()].map((k) => Number(k.split(".")[1]))) + 1;
    const get = (kind: string, e: number) => {
      const t = parts.get(`${kind}.${e}`);
      if (!t) throw new WeightLoadError(`checkpoint has split experts under '${prefix}' but no '${prefix}.${e}.${kind}_proj.weight'`);
      return t;
    };
    const gateUp: RawTensor[] = [], down: RawTensor[] = [];
    for (let e = 0; e < E; e++) {
      gateUp.push(get("gate", e), get("up", e));
      down.push(get("down", e));
    }
    const [I, H] = gateUp[0].shape;
    out.set(`${prefix}.gate_up_proj`, concat(`${prefix}.gate_up_proj`, gateUp, [E, 2 * I, H]));
    out.set(`${prefix}.down_proj`, concat(`${prefix}.down_proj`, down, [E, H, I]));
  }
  return out;
}

/** One tensor of `shape` from the bytes of `parts` in order (all of one dtype and shape). */
function concat(name: string, parts: RawTensor[], shape: number[]): RawTensor {
  const { dtype, shape: s0 } = parts[0];
  const bad = parts.find((p) => p.dtype !== dtype || p.shape.join() !== s0.join());
  if (bad) throw new WeightLoadError(`cannot fuse '${bad.name}' [${bad.shape}] (${bad.dtype}) into '${name}': expected [${s0}] (${dtype}) like '${parts[0].name}'`);
  const bytes = new Uint8Array(shape.reduce((a, b) => a * b, 1) * (dtype === "uint8" || dtype === "float8_e4m3fn" ? 1 : itemsize(dtype)));
  let offset = 0;
  for (const p of parts) {
    bytes.set(p.bytes, offset);
    offset += p.bytes.length;
  }
  return { name, dtype, shape, bytes };
}
