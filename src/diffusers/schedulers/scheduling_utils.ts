/**
 * Scheduler base (diffusers' schedulers/scheduling_utils.py SchedulerMixin + ConfigMixin): a
 * scheduler holds its config (scheduler_config.json fields, snake_case, with the class's defaults
 * filled in), is built from a config with `fromConfig` (as `EulerDiscreteScheduler.from_config(
 * ddim.config)` in diffusers: fields the class does not know are kept but unused), and is found by
 * `_class_name` in a registry. Unknown classes are refused naming the supported ones.
 */
import type { Tensor } from "../../tensor/tensor.js";

export type SchedulerConfig = Record<string, unknown>;

/** Output of a scheduler step: the latents of the previous (less noisy) timestep. */
export interface SchedulerOutput {
  prevSample: Tensor;
}

export class SchedulerConfigError extends Error {}

/** A diffusion sampler: set its timesteps, scale the model input, step from x_t to x_{t-1}. */
export abstract class SchedulerMixin {
  /** The full config: given fields over the class's defaults, `_class_name` set to this class. */
  readonly config: SchedulerConfig;
  /** Timesteps of the current schedule (after setTimesteps), first = noisiest. */
  timesteps: number[] = [];
  /** How many inference steps setTimesteps was called with. */
  numInferenceSteps = 0;

  constructor(config: SchedulerConfig, defaults: SchedulerConfig) {
    const merged: SchedulerConfig = { ...defaults };
    for (const [k, v] of Object.entries(config)) if (v !== undefined) merged[k] = v;
    merged._class_name = this.constructor.name;
    this.config = merged;
  }

  /** Build this scheduler class from `config` (any scheduler's config; unknown fields are kept unused). */
  static fromConfig<T extends SchedulerMixin>(this: new (config: SchedulerConfig) => T, config: SchedulerConfig): T {
    return new this(config);
  }

  /** The standard deviation of the initial noise (latents are multiplied by it before step 0). */
  abstract get initNoiseSigma(): number;
  /** Compute the schedule for `numInferenceSteps` steps. Throws RangeError for a bad count. */
  abstract setTimesteps(numInferenceSteps: number, opts?: Record<string, unknown>): void;
  /** The model input at timestep `t` (identity unless the scheduler scales it). */
  scaleModelInput(sample: Tensor, _t: number): Tensor {
    return sample;
  }
  /** One sampler step: model output at timestep `t` and the current sample -> previous sample. */
  abstract step(modelOutput: Tensor, t: number, sample: Tensor): SchedulerOutput;

  /** Typed config reads (the names are scheduler_config.json's). */
  protected num(key: string): number {
    const v = this.config[key];
    if (typeof v !== "number") throw new SchedulerConfigError(`${this.constructor.name}: config field '${key}' must be a number, got ${JSON.stringify(v)}`);
    return v;
  }
  protected str(key: string): string {
    const v = this.config[key];
    if (typeof v !== "string") throw new SchedulerConfigError(`${this.constructor.name}: config field '${key}' must be a string, got ${JSON.stringify(v)}`);
    return v;
  }
  protected bool(key: string): boolean {
    const v = this.config[key];
    if (typeof v !== "boolean") throw new SchedulerConfigError(`${this.constructor.name}: config field '${key}' must be a boolean, got ${JSON.stringify(v)}`);
    return v;
  }
  /** `key` must be one of `allowed`; throws naming the supported values. */
  protected oneOf(key: string, allowed: readonly string[]): string {
    const v = this.str(key);
    if (!allowed.includes(v)) throw new SchedulerConfigError(`${this.constructor.name}: ${key} '${v}' is not supported; supported: ${allowed.join(", ")}`);
    return v;
  }
  /** Refuse a config flag this implementation does not support when it is on. */
  protected refuse(key: string, off: unknown): void {
    const v = this.config[key];
    if (v !== undefined && v !== null && v !== off) throw new SchedulerConfigError(`${this.constructor.name}: config ${key}=${JSON.stringify(v)} is not supported (only ${JSON.stringify(off)})`);
  }
}

export type SchedulerClass = (new (config: SchedulerConfig) => SchedulerMixin) & { name: string };

const SCHEDULERS = new Map<string, SchedulerClass>();

/** Register a scheduler class under its diffusers class name. Throws on a duplicate name. */
export function registerScheduler(name: string, cls: SchedulerClass): void {
  if (SCHEDULERS.has(name)) throw new Error(`scheduler ${name} is already registered`);
  SCHEDULERS.set(name, cls);
}

/** The registered scheduler class names. */
export function supportedSchedulers(): string[] {
  return [...SCHEDULERS.keys()];
}

/** The scheduler class named `name`; throws "unsupported scheduler X; supported: …". */
export function schedulerClass(name: string): SchedulerClass {
  const cls = SCHEDULERS.get(name);
  if (!cls) throw new SchedulerConfigError(`unsupported scheduler ${name}; supported: ${supportedSchedulers().join(", ")}`);
  return cls;
}

/** A scheduler from a scheduler_config.json object, by its `_class_name`. Throws for an unknown class. */
export function schedulerFromConfig(config: SchedulerConfig): SchedulerMixin {
  const name = config._class_name;
  if (typeof name !== "string") throw new SchedulerConfigError(`scheduler config has no _class_name; supported: ${supportedSchedulers().join(", ")}`);
  return new (schedulerClass(name))(config);
}

// ------------------------------------------------------------------ beta schedules (host, float64)

/**
 * The cumulative products ᾱ_t of the training noise schedule (diffusers' DDPM-family __init__):
 * beta_schedule "linear", "scaled_linear" (linspace of sqrt(beta) squared, SD's) or
 * "squaredcos_cap_v2" (betas_for_alpha_bar, cosine), or `trained_betas`; with
 * rescale_betas_zero_snr applied when set. Computed in float32 steps as torch does.
 */
export function alphasCumprod(config: SchedulerConfig, owner: string): Float64Array {
  const N = config.num_train_timesteps as number;
  const start = config.beta_start as number, end = config.beta_end as number;
  let betas: Float64Array;
  const trained = config.trained_betas;
  if (Array.isArray(trained)) {
    betas = Float64Array.from(trained as number[], Math.fround);
  } else if (config.beta_schedule === "linear") {
    betas = linspace32(start, end, N);
  } else if (config.beta_schedule === "scaled_linear") {
    betas = linspace32(Math.sqrt(start), Math.sqrt(end), N).map((b) => Math.fround(b * b));
  } else if (config.beta_schedule === "squaredcos_cap_v2") {
    const alphaBar = (t: number) => Math.cos(((t + 0.008) / 1.008) * Math.PI / 2) ** 2;
    betas = Float64Array.from({ length: N }, (_, i) => Math.fround(Math.min(1 - alphaBar((i + 1) / N) / alphaBar(i / N), 0.999)));
  } else {
    throw new SchedulerConfigError(`${owner}: beta_schedule '${String(config.beta_schedule)}' is not supported; supported: linear, scaled_linear, squaredcos_cap_v2`);
  }
  if (config.rescale_betas_zero_snr === true) betas = rescaleZeroTerminalSnr(betas);
  const out = new Float64Array(N);
  let prod = 1;
  for (let i = 0; i < N; i++) out[i] = prod = Math.fround(prod * Math.fround(1 - betas[i]));
  if (config.rescale_betas_zero_snr === true) out[N - 1] = 2 ** -24; // diffusers: avoid an infinite sigma
  return out;
}

/** torch.linspace(start, end, n) in float32 (its two-sided formula). */
export function linspace32(start: number, end: number, n: number): Float64Array {
  const s = Math.fround(start), e = Math.fround(end);
  const step = n > 1 ? Math.fround((e - s) / (n - 1)) : 0;
  return Float64Array.from({ length: n }, (_, i) => Math.fround(i < n / 2 ? s + step * i : e - step * (n - 1 - i)));
}

/** diffusers' rescale_zero_terminal_snr (https://arxiv.org/abs/2305.08891, Algorithm 1). */
function rescaleZeroTerminalSnr(betas: Float64Array): Float64Array {
  const n = betas.length;
  const sqrtBar = new Float64Array(n);
  let prod = 1;
  for (let i = 0; i < n; i++) sqrtBar[i] = Math.sqrt((prod *= 1 - betas[i]));
  const first = sqrtBar[0], last = sqrtBar[n - 1];
  for (let i = 0; i < n; i++) sqrtBar[i] = (sqrtBar[i] - last) * first / (first - last);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const bar = sqrtBar[i] ** 2;
    out[i] = 1 - (i === 0 ? bar : bar / sqrtBar[i - 1] ** 2);
  }
  return out;
}
