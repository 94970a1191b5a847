/**
 * kernelize (the `kernels` library's kernelize): replace the forwards of a model's layers marked
 * with useKernelForwardFromHub by kernels from hub repositories, for the device the model runs on.
 * Where a repository has no variant for that device (or no op for the layer), a module cannot use
 * the kernel (say, experts with another activation), or the model has no module with that layer,
 * the built-in forward stays and a note is printed once per layer name; `useFallback: false` makes
 * that an error.
 */
import { kernelLayerName } from "../nn/kernel_hub.js";
import type { Module } from "../nn/module.js";
import { getKernel, type GetKernelOptions, type Kernel } from "./kernel.js";
import { LAYER_CONTRACTS } from "./layers.js";

/** A layer's kernel on the Hub or in a folder (the `kernels` library's LayerRepository). */
export class LayerRepository {
  readonly repoId: string;
  readonly layerName: string;
  readonly version?: number;
  readonly revision?: string;
  constructor(o: { repoId: string; layerName: string; version?: number; revision?: string }) {
    this.repoId = o.repoId;
    this.layerName = o.layerName;
    this.version = o.version;
    this.revision = o.revision;
  }
}

/** Layer name → device type → repository. */
export type KernelMapping = Record<string, Record<string, LayerRepository>>;

export interface KernelizeOptions {
  /** Device type the model runs on ("cpu" or "webgpu"). */
  device: string;
  /** Only "inference" (kernels here have no backward). */
  mode?: "inference";
  mapping: KernelMapping;
  /** Keep the built-in forward where no kernel fits (default true); false throws instead. */
  useFallback?: boolean;
  /** Passed to getKernel (cache, endpoint, lock, …). */
  load?: GetKernelOptions;
  /** Where the once-per-layer fallback notes go (default: stderr). */
  log?: (line: string) => void;
}

/**
 * Kernelize `model` in place and return it. Throws for a mode other than "inference", a mapping
 * naming a layer without a tsorch contract, and (useFallback: false) where a layer keeps its
 * built-in forward. Returns the number of modules whose forward was replaced, by layer name.
 */
export async function kernelize<M extends Module>(model: M, o: KernelizeOptions): Promise<Record<string, number>> {
  if ((o.mode ?? "inference") !== "inference") throw new Error(`kernelize: mode ${o.mode} is not supported; only "inference"`);
  const log = o.log ?? ((l: string) => process.stderr.write(l + "\n"));
  const kernels = new Map<string, Kernel>();
  const replaced: Record<string, number> = {};
  const noted = new Set<string>();
  const fallback = (layer: string, why: string) => {
    if (o.useFallback === false) throw new Error(`kernelize: layer ${layer} on ${o.device}: ${why} (useFallback is false)`);
    if (!noted.has(layer)) log(`kernelize: layer ${layer} keeps its built-in forward on ${o.device}: ${why}`);
    noted.add(layer);
  };
  for (const layer of Object.keys(o.mapping)) {
    if (!LAYER_CONTRACTS[layer]) throw new Error(`kernelize: no layer contract for ${layer}; known layers: ${Object.keys(LAYER_CONTRACTS).join(", ")}`);
  }
  const marked = new Set<string>();
  for (const [path, m] of [...model.namedModules()]) {
    const layer = kernelLayerName(m);
    const repo = layer && o.mapping[layer]?.[o.device];
    if (!layer || !repo) continue;
    marked.add(layer);
    const key = `${repo.repoId}@${repo.revision ?? repo.version ?? "main"}`;
    let kernel = kernels.get(key);
    if (!kernel) {
      kernel = await getKernel(repo.repoId, { ...o.load, version: repo.version, revision: repo.revision });
      kernels.set(key, kernel);
    }
    const op = kernel.layerOp(repo.layerName, o.device);
    if (!op) {
      fallback(layer, `kernel ${repo.repoId} has no ${o.device} variant with layer ${repo.layerName} (its devices: ${kernel.devices.join(", ")})`);
      continue;
    }
    const forward = LAYER_CONTRACTS[layer](m, kernel, op);
    if (typeof forward === "string") {
      fallback(layer, `${path || "model"}: ${forward}`);
      continue;
    }
    (m as unknown as { forward: typeof forward }).forward = forward;
    replaced[layer] = (replaced[layer] ?? 0) + 1;
  }
  for (const layer of Object.keys(o.mapping)) {
    if (o.mapping[layer][o.device] && !marked.has(layer)) fallback(layer, `the model (${model.constructor.name}) has no module with a swappable ${layer} forward`);
  }
  return replaced;
}
