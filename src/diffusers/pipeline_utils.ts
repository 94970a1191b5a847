/**
 * DiffusionPipeline (diffusers' pipelines/pipeline_utils.py): a pipeline folder or Hub id holds
 * model_index.json (`_class_name` and one `[library, class]` pair per component) and one folder per
 * component. `fromPretrained` picks the pipeline class from a registry by `_class_name` (or uses the
 * class it is called on), loads every listed component with the loader registered for its class,
 * and places the models on one device in one dtype. `to(device)` moves them all.
 */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Device } from "../devices/device.js";
import { openDevice } from "../devices/registry.js";
import { readJsonObject } from "../hub/config.js";
import { loadCheckpoint, resolvePipeline, COMPONENT_WEIGHT_FILES, MODEL_INDEX_FILE, type JsonObject, type RawTensor, type ResolveOptions } from "../hub/index.js";
import { SOURCE_OPTION_KEYS } from "../hub/source.js";
import { compile } from "../compile/index.js";
import { Module } from "../nn/module.js";
import { isFloating, parseDType, type DType } from "../tensor/dtype.js";
import type { Tensor } from "../tensor/tensor.js";
import { checkKnownOptions, closestName } from "../transformers/generation/configuration_utils.js";
import type { PipelineImage } from "./image_processor.js";
import type { SchedulerMixin } from "./schedulers/scheduling_utils.js";

/** Options of {@link DiffusionPipeline.fromPretrained}. */
export interface PipelineLoadOptions extends ResolveOptions {
  /** "cpu" (default), "webgpu", … */
  device?: string;
  /** Weight dtype of the models: "float32", "float16", "bfloat16"; default/"auto": as stored. */
  dtype?: string;
}

/** What a component loader gets: the component's folder, the device and dtype of the pipeline. */
export interface ComponentContext {
  /** Component name in model_index.json ("unet", "text_encoder", …). */
  name: string;
  dir: string;
  device: Device;
  dtype?: DType;
}

export class PipelineLoadError extends Error {}

/** The loader key of every class named "…Scheduler" (registered by components.ts; the scheduler registry picks the class). */
export const SCHEDULER_COMPONENT = "*Scheduler";

export type ComponentLoader = (ctx: ComponentContext) => Promise<unknown>;
const COMPONENTS = new Map<string, ComponentLoader>();

/** Register how to load components of class `className` (e.g. "UNet2DConditionModel"). Throws on a duplicate. */
export function registerComponent(className: string, loader: ComponentLoader): void {
  if (COMPONENTS.has(className)) throw new Error(`component class ${className} is already registered`);
  COMPONENTS.set(className, loader);
}

/** A model with a config.json, weights by checkpoint name and a device move (what loadModelComponent builds). */
export interface ComponentModel extends Module {
  loadWeights(weights: Map<string, RawTensor>, device: Device, dtype?: DType): void;
}

/**
 * Load a model component: `<dir>/config.json`, then the weights of `<dir>` (the first of
 * COMPONENT_WEIGHT_FILES present, single or sharded). Throws PipelineLoadError naming the
 * component and the missing file, or the loader's own error prefixed with the component.
 */
export async function loadModelComponent<M extends ComponentModel>(ctx: ComponentContext, make: (config: JsonObject) => M): Promise<M> {
  const configFile = join(ctx.dir, "config.json");
  if (!existsSync(configFile)) throw new PipelineLoadError(`component '${ctx.name}': missing ${configFile}`);
  const weightFile = COMPONENT_WEIGHT_FILES.find((f) => existsSync(join(ctx.dir, f)) || existsSync(join(ctx.dir, `${f}.index.json`)));
  if (!weightFile) throw new PipelineLoadError(`component '${ctx.name}': no weights in ${ctx.dir} (looked for ${COMPONENT_WEIGHT_FILES.join(", ")} and their .index.json)`);
  try {
    const model = make(await readJsonObject(configFile));
    model.loadWeights(await loadCheckpoint(ctx.dir, weightFile), ctx.device, ctx.dtype);
    return model;
  } catch (e) {
    throw new PipelineLoadError(`component '${ctx.name}' (${ctx.dir}): ${(e as Error).message}`, { cause: e });
  }
}

export type PipelineClass = { name: string; new (components: Record<string, unknown>): DiffusionPipeline };
const PIPELINES = new Map<string, PipelineClass>();

/** Register a pipeline class under its diffusers `_class_name`. Throws on a duplicate. */
export function registerPipeline(name: string, cls: PipelineClass): void {
  if (PIPELINES.has(name)) throw new Error(`pipeline ${name} is already registered`);
  PIPELINES.set(name, cls);
}

/** The registered pipeline class names. */
export function supportedPipelines(): string[] {
  return [...PIPELINES.keys()];
}

/** The call options every text-to-image pipeline takes (diffusers' __call__ names, camel-cased). */
export interface DiffusionCallOptions {
  prompt: string | string[];
  /** Pixels; the pipeline's default when absent. */
  height?: number;
  width?: number;
  numInferenceSteps?: number;
  guidanceScale?: number;
  /** Seed of the initial noise (tsorch's generator; not PyTorch's). Ignored when `latents` is given. */
  seed?: number;
  /** Initial latents, in the pipeline's layout. */
  latents?: Tensor;
  /** Called after every denoising step with its index, timestep and the new latents. */
  callbackOnStepEnd?: (step: number, timestep: number, latents: Tensor) => void | Promise<void>;
  /** "pil" (default): 8-bit images; "np": Tensor [B, H, W, 3] in [0, 1]; "latent": the final latents. */
  outputType?: "pil" | "np" | "latent";
}

const CALL_OPTIONS = ["prompt", "height", "width", "numInferenceSteps", "guidanceScale", "seed", "latents", "callbackOnStepEnd", "outputType"];
const OUTPUT_TYPES = ["pil", "np", "latent"];

/**
 * Refuse what a pipeline call would otherwise ignore: an option `pipeline` does not take (naming the
 * closest valid one, e.g. `num_inference_steps` → `numInferenceSteps`; `extra`: the pipeline's own
 * options) or an unknown outputType. Throws TypeError.
 */
export function checkCallOptions(pipeline: string, o: object, extra: readonly string[]): void {
  const valid = [...CALL_OPTIONS, ...extra];
  for (const [key, value] of Object.entries(o)) {
    if (value === undefined) continue;
    if (!valid.includes(key)) {
      const near = closestName(key, valid);
      throw new TypeError(`${pipeline}: unknown option '${key}'; ${near ? `did you mean '${near}'?` : `valid options: ${valid.join(", ")}`}`);
    }
  }
  const t = (o as DiffusionCallOptions).outputType;
  if (t !== undefined && !OUTPUT_TYPES.includes(t)) throw new TypeError(`${pipeline}: outputType must be one of ${OUTPUT_TYPES.join(", ")}, got ${JSON.stringify(t)}`);
}

/** What a pipeline call returns. */
export interface DiffusionOutput {
  /** PipelineImage[] for "pil", a Tensor for "np" and "latent". */
  images: PipelineImage[] | Tensor;
}

/** A diffusers pipeline: named components (models, tokenizers, a scheduler) on one device. */
export abstract class DiffusionPipeline {
  /** Components by model_index.json name (null for optional ones listed as [null, null]). */
  readonly components: Record<string, unknown>;
  /** model_index.json as read (empty for a pipeline built from components). */
  modelIndex: JsonObject = {};

  /** The compiled denoiser forward and VAE decoder after {@link compile}, else null (eager). */
  protected compiled: { denoiser: (...args: any[]) => Tensor; decode: (z: Tensor) => Tensor } | null = null;

  constructor(components: Record<string, unknown>) {
    this.components = components;
  }

  /** The denoising model (UNet or transformer) whose forward {@link compile} compiles. */
  protected abstract get denoiser(): Module & { forward(...args: any[]): Tensor };

  /**
   * torch.compile the denoiser's forward and the VAE decoder (compile/compile.ts): the first image
   * of a size compiles both, later images of that size replay the graphs (torch.compiler.stats()
   * counts cacheHits), a new size compiles once. The timestep enters the denoiser as a tensor, so
   * the steps share one graph. Whatever cannot be captured is reported as a graph break and runs
   * eagerly. Moving the pipeline (`to`) recompiles on the next call (the parameters are guarded).
   */
  async compile(): Promise<this> {
    const denoiser = this.denoiser;
    this.compiled = {
      denoiser: compile(denoiser, { name: denoiser.constructor.name }),
      decode: compile(new VaeDecode(this.component("vae")), { name: "AutoencoderKL.decode" }),
    };
    return this;
  }

  /** True after {@link compile}. */
  get isCompiled(): boolean { return this.compiled !== null; }

  /** The denoiser's forward, compiled after {@link compile}. */
  protected denoise(...args: unknown[]): Tensor {
    const d = this.denoiser;
    return this.compiled ? this.compiled.denoiser(...args) : d.forward(...args);
  }

  /** vae.decode(z), compiled after {@link compile}. */
  protected decodeLatents(z: Tensor): Tensor {
    return this.compiled ? this.compiled.decode(z) : this.component<VaeDecoder>("vae").decode(z);
  }

  /** Generate images (see each pipeline for its extra options). */
  abstract call(options: DiffusionCallOptions): Promise<DiffusionOutput>;

  /** The scheduler component (replace it to change the sampler, as `pipe.scheduler = X.from_config(...)`). */
  get scheduler(): SchedulerMixin { return this.component("scheduler"); }
  set scheduler(s: SchedulerMixin) { this.components.scheduler = s; }

  /** The component `name`; throws PipelineLoadError when the pipeline has none. */
  protected component<T>(name: string): T {
    const c = this.components[name];
    if (c === undefined || c === null) throw new PipelineLoadError(`${this.constructor.name} needs component '${name}', which model_index.json does not provide`);
    return c as T;
  }

  /** The device of the pipeline's models. */
  get device(): Device {
    for (const c of Object.values(this.components)) if (c instanceof Module && "device" in c) return (c as unknown as { device: Device }).device;
    throw new Error(`${this.constructor.name} has no model components`);
  }

  /**
   * Load a pipeline from a folder or Hub id. On DiffusionPipeline the class comes from
   * model_index.json `_class_name`; on a subclass (StableDiffusionPipeline.fromPretrained) that
   * class is used. Throws PipelineLoadError: no model_index.json, an unsupported pipeline class
   * (naming the supported ones), an unsupported component class, a missing component folder,
   * config or weights (naming them); HubError when the id cannot be resolved.
   */
  static async fromPretrained<T extends DiffusionPipeline = DiffusionPipeline>(this: Function, dirOrId: string, opts: PipelineLoadOptions = {}): Promise<T> {
    checkKnownOptions("DiffusionPipeline.fromPretrained", opts, ["device", "dtype", ...SOURCE_OPTION_KEYS]);
    const dtype = parseWeightDtype(opts.dtype);
    const device = await openDevice(opts.device ?? "cpu");
    const root = await resolvePipeline(dirOrId, opts);
    const indexFile = join(root, MODEL_INDEX_FILE);
    if (!existsSync(indexFile)) throw new PipelineLoadError(`${root} is not a diffusers pipeline: ${MODEL_INDEX_FILE} not found`);
    const index = await readJsonObject(indexFile);
    const className = index._class_name;
    let cls: PipelineClass | undefined;
    if (this !== DiffusionPipeline) cls = this as unknown as PipelineClass;
    else if (typeof className === "string") cls = PIPELINES.get(className);
    if (!cls) throw new PipelineLoadError(`unsupported pipeline class ${JSON.stringify(className)} in ${indexFile}; supported: ${supportedPipelines().join(", ")}`);
    const components: Record<string, unknown> = {};
    for (const [name, entry] of Object.entries(index)) {
      if (name.startsWith("_") || !Array.isArray(entry)) continue;
      const [, compClass] = entry as [string | null, string | null];
      if (compClass === null) {
        components[name] = null;
        continue;
      }
      const loader = COMPONENTS.get(compClass) ?? (compClass.endsWith("Scheduler") ? COMPONENTS.get(SCHEDULER_COMPONENT) : undefined);
      if (!loader) throw new PipelineLoadError(`component '${name}' has class ${compClass}, which tsorch cannot load; supported: ${[...COMPONENTS.keys()].join(", ")}`);
      const dir = join(root, name);
      if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new PipelineLoadError(`component '${name}' (${compClass}) is listed in ${indexFile} but its folder ${dir} is missing`);
      components[name] = await loader({ name, dir, device, dtype });
    }
    const pipe = new cls(components);
    pipe.modelIndex = index;
    return pipe as T;
  }

  /** Move every model component to `device` (e.g. "webgpu"), optionally casting weights to `dtype`. Returns this. */
  async to(device: string | Device, dtype?: string): Promise<this> {
    const dt = parseWeightDtype(dtype);
    for (const c of Object.values(this.components)) if (c instanceof Module) await c.to(device, dt);
    return this;
  }
}

/** A weight dtype option ("auto"/undefined = as stored). Throws naming the supported ones. */
export function parseWeightDtype(dtype: string | undefined): DType | undefined {
  const supported = "auto, float32, float16, bfloat16";
  if (dtype === undefined || dtype === "auto") return undefined;
  let dt: DType;
  try {
    dt = parseDType(dtype);
  } catch {
    throw new PipelineLoadError(`unknown dtype '${dtype}'; supported: ${supported}`);
  }
  if (!isFloating(dt)) throw new PipelineLoadError(`dtype '${dtype}' is not a weight dtype; supported: ${supported}`);
  return dt;
}

interface VaeDecoder extends Module { decode(z: Tensor): Tensor }

/** vae.decode as a module's forward, so compile guards the VAE's parameters. */
class VaeDecode extends Module {
  constructor(private readonly vae: VaeDecoder) {
    super();
    this.module("vae", vae);
  }
  forward(z: Tensor): Tensor { return this.vae.decode(z); }
}
