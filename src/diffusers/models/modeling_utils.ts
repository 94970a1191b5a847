/**
 * ModelMixin (diffusers' models/modeling_utils.py): the base of the diffusers models (UNet, VAE,
 * transformers): the config.json it was built from, the device it lives on, loading a checkpoint
 * whose tensor names equal the module tree's, and moving to another device.
 */
import type { Device } from "../../devices/device.js";
import { openDevice } from "../../devices/registry.js";
import type { JsonObject, RawTensor } from "../../hub/index.js";
import { Module } from "../../nn/module.js";
import type { DType } from "../../tensor/dtype.js";
import { loadModuleWeights } from "../../transformers/modeling_utils.js";

export abstract class ModelMixin extends Module {
  /** The model's device (set by loadWeights and to). */
  device!: Device;

  constructor(readonly config: JsonObject) {
    super();
  }

  /**
   * Load `weights` by name onto `device`, floating weights converted to `dtype` (undefined: as
   * stored). Throws WeightLoadError naming missing, unexpected and mis-shaped weights.
   */
  loadWeights(weights: Map<string, RawTensor>, device: Device, dtype?: DType): void {
    loadModuleWeights(this, weights, device, dtype);
    this.device = device;
  }

  override async to(device: string | Device, dtype?: DType): Promise<this> {
    await super.to(device, dtype);
    this.device = await openDevice(device);
    return this;
  }
}

/** A config.json field as a number (`fallback` when absent/null); throws naming the model and field. */
export function cfgNum(config: JsonObject, key: string, fallback: number | undefined, model: string): number {
  const v = config[key];
  if (v === undefined || v === null) {
    if (fallback === undefined) throw new Error(`${model}: config.json is missing required field '${key}'`);
    return fallback;
  }
  if (typeof v !== "number") throw new Error(`${model}: config.json field '${key}' must be a number, got ${JSON.stringify(v)}`);
  return v;
}

/** A config.json field that is one value or a per-block list, as a list of `n` values. */
export function perBlock<T>(config: JsonObject, key: string, fallback: T, n: number, model: string): T[] {
  const v = config[key] ?? fallback;
  if (Array.isArray(v)) {
    if (v.length !== n) throw new Error(`${model}: config.json field '${key}' has ${v.length} entries for ${n} blocks`);
    return v as T[];
  }
  return Array.from({ length: n }, () => v as T);
}

/** Refuse a config.json option this implementation does not support (anything but `off`). */
export function refuseOption(config: JsonObject, key: string, off: unknown, model: string): void {
  const v = config[key];
  if (v !== undefined && v !== null && v !== off) throw new Error(`${model}: config.json ${key}=${JSON.stringify(v)} is not supported (tsorch runs ${JSON.stringify(off)})`);
}
