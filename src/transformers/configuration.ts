/**
 * Config helpers shared by every architecture (transformers' configuration_utils.py): typed reads
 * of config.json fields with transformers' defaults, and rope parameters in either the legacy
 * (`rope_theta` + `rope_scaling`) or the newer (`rope_parameters`) form.
 */
import type { RopeParameters } from "../nn/rotary.js";

export type RawConfig = Record<string, unknown>;

export class ConfigError extends Error {}

/** Field `key` of `raw` as a number, `fallback` when absent or null; throws when of another type. */
export function num(raw: RawConfig, key: string, fallback?: number): number {
  const v = raw[key];
  if (v === undefined || v === null) {
    if (fallback === undefined) throw new ConfigError(`config.json is missing required field '${key}'`);
    return fallback;
  }
  if (typeof v !== "number") throw new ConfigError(`config.json field '${key}' must be a number, got ${JSON.stringify(v)}`);
  return v;
}

export function bool(raw: RawConfig, key: string, fallback: boolean): boolean {
  const v = raw[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "boolean") throw new ConfigError(`config.json field '${key}' must be a boolean, got ${JSON.stringify(v)}`);
  return v;
}

export function str(raw: RawConfig, key: string, fallback: string): string {
  const v = raw[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "string") throw new ConfigError(`config.json field '${key}' must be a string, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * `raw` with `defaults` filled in for the fields config.json leaves out (a derived family's config
 * class defaults, e.g. Qwen2Config's, where they differ from its base's). An explicit null is kept.
 */
export function withDefaults(raw: RawConfig, defaults: RawConfig): RawConfig {
  const out: RawConfig = { ...raw };
  for (const [k, v] of Object.entries(defaults)) if (out[k] === undefined) out[k] = v;
  return out;
}

/** Token id field that may be a number, a list of numbers or null. */
export function ids(raw: RawConfig, key: string): number[] {
  const v = raw[key];
  if (v === undefined || v === null) return [];
  if (typeof v === "number") return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === "number")) return v as number[];
  throw new ConfigError(`config.json field '${key}' must be a token id or a list of ids`);
}

/**
 * Rope parameters of a config (or of one entry of a per-layer-type `rope_parameters` dict):
 * `rope_parameters` when present, else `rope_theta` and `rope_scaling` (whose `type` is the old
 * name of `rope_type`), with `defaultTheta` when neither gives a theta. Also carries the config's
 * max_position_embeddings, and original_max_position_embeddings for llama3/yarn/longrope.
 */
export function ropeParameters(raw: RawConfig, defaultTheta = 10000, layerType?: string): RopeParameters {
  let params = raw.rope_parameters as Record<string, unknown> | undefined | null;
  if (params && layerType && typeof params[layerType] === "object") params = params[layerType] as Record<string, unknown>;
  const scaling = (raw.rope_scaling ?? {}) as Record<string, unknown>;
  const merged: Record<string, unknown> = { ...scaling, ...(params ?? {}) };
  const ropeType = (merged.rope_type ?? merged.type ?? "default") as string;
  const theta = (merged.rope_theta ?? raw.rope_theta ?? defaultTheta) as number;
  const partial = merged.partial_rotary_factor ?? raw.partial_rotary_factor;
  const maxPositions = raw.max_position_embeddings;
  // standardize_rope_params: scaled types know their pretraining length (a top-level field wins
  // over a single rope dict's), else it is max_position_embeddings.
  const original = ["llama3", "yarn", "longrope"].includes(ropeType)
    ? (params === raw.rope_parameters ? raw.original_max_position_embeddings : undefined) ?? merged.original_max_position_embeddings ?? maxPositions
    : merged.original_max_position_embeddings;
  return {
    ...merged,
    rope_type: ropeType,
    rope_theta: theta,
    ...(typeof partial === "number" ? { partial_rotary_factor: partial } : {}),
    ...(typeof maxPositions === "number" ? { max_position_embeddings: maxPositions } : {}),
    ...(typeof original === "number" ? { original_max_position_embeddings: original } : {}),
  } as RopeParameters;
}
