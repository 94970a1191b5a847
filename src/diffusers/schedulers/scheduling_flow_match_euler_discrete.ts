/**
 * FlowMatchEulerDiscreteScheduler (diffusers' schedulers/scheduling_flow_match_euler_discrete.py):
 * the Euler sampler of rectified-flow models (FLUX, SD3). sigma runs from 1 (noise) to 0 (data);
 * the model predicts the velocity v and each step moves the sample by (sigma_next - sigma) · v.
 *
 * Schedules are computed on the host with the rounding diffusers gets from numpy/torch: float32
 * where diffusers works on float32 arrays (sigmas passed in, the training schedule), float64 where
 * it works on numpy's float64 linspace, so timesteps and sigmas equal diffusers' bit for bit.
 */
import { add, mul } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { registerScheduler, SchedulerConfigError, SchedulerMixin, type SchedulerConfig, type SchedulerOutput } from "./scheduling_utils.js";

/** The scheduler_config.json fields, with diffusers' defaults (snake_case, as stored). */
export interface FlowMatchEulerDiscreteConfig {
  num_train_timesteps: number;
  shift: number;
  use_dynamic_shifting: boolean;
  base_shift: number;
  max_shift: number;
  base_image_seq_len: number;
  max_image_seq_len: number;
  invert_sigmas: boolean;
  shift_terminal: number | null;
  use_karras_sigmas: boolean;
  use_exponential_sigmas: boolean;
  use_beta_sigmas: boolean;
  time_shift_type: "exponential" | "linear";
  stochastic_sampling: boolean;
}

const DEFAULTS: FlowMatchEulerDiscreteConfig & SchedulerConfig = {
  num_train_timesteps: 1000, shift: 1.0, use_dynamic_shifting: false, base_shift: 0.5, max_shift: 1.15,
  base_image_seq_len: 256, max_image_seq_len: 4096, invert_sigmas: false, shift_terminal: null,
  use_karras_sigmas: false, use_exponential_sigmas: false, use_beta_sigmas: false,
  time_shift_type: "exponential", stochastic_sampling: false,
};

/** Options of {@link FlowMatchEulerDiscreteScheduler.setTimesteps} (diffusers' set_timesteps keywords). */
export interface FlowMatchSetTimestepsOptions {
  /** Custom sigmas, one per step (FluxPipeline passes linspace(1, 1/n, n)). */
  sigmas?: readonly number[];
  /** Custom timesteps, one per step (in [0, num_train_timesteps]). */
  timesteps?: readonly number[];
  /** The resolution-dependent shift (required with use_dynamic_shifting; see {@link calculateShift}). */
  mu?: number;
}

const f32 = Math.fround;
const f64 = (x: number) => x;

/** numpy.linspace(start, stop, n) in float64 (n values, both ends included). */
export function linspace(start: number, stop: number, n: number): number[] {
  if (n === 1) return [start];
  const step = (stop - start) / (n - 1);
  return Array.from({ length: n }, (_, i) => (i === n - 1 ? stop : start + i * step));
}

/**
 * FluxPipeline's calculate_shift: mu grows linearly with the image token count, from base_shift at
 * base_seq_len to max_shift at max_seq_len (pipelines/flux/pipeline_flux.py).
 */
export function calculateShift(imageSeqLen: number, baseSeqLen = 256, maxSeqLen = 4096, baseShift = 0.5, maxShift = 1.15): number {
  const m = (maxShift - baseShift) / (maxSeqLen - baseSeqLen);
  const b = baseShift - m * baseSeqLen;
  return imageSeqLen * m + b;
}

/**
 * The flow-matching Euler scheduler. `timesteps` (length n) and `sigmas` (length n + 1, ending in
 * 0, or 1 with invert_sigmas) are set by setTimesteps; `step` advances one of them.
 * Throws SchedulerConfigError on configs it cannot honour (use_beta_sigmas, stochastic_sampling,
 * several sigma schedules at once, an unknown time_shift_type, mistyped fields), naming the field.
 */
export class FlowMatchEulerDiscreteScheduler extends SchedulerMixin {
  /** Scheduler order (steps per model call): 1. */
  readonly order = 1;
  /** σ per step, then 0 (1 with invert_sigmas); before setTimesteps, the training schedule. */
  sigmas: number[];
  private readonly c: FlowMatchEulerDiscreteConfig;
  private stepIndex: number | null = null;
  private beginIndex: number | null = null;
  private readonly sigmaMin: number;
  private readonly sigmaMax: number;

  constructor(config: SchedulerConfig = {}) {
    super(config, DEFAULTS);
    const c = this.c = this.config as unknown as FlowMatchEulerDiscreteConfig;
    for (const k of ["num_train_timesteps", "shift", "base_shift", "max_shift", "base_image_seq_len", "max_image_seq_len"]) this.num(k);
    for (const k of ["use_dynamic_shifting", "invert_sigmas", "use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas", "stochastic_sampling"]) this.bool(k);
    if ([c.use_beta_sigmas, c.use_exponential_sigmas, c.use_karras_sigmas].filter(Boolean).length > 1) {
      throw new SchedulerConfigError("FlowMatchEulerDiscreteScheduler: only one of use_beta_sigmas, use_exponential_sigmas, use_karras_sigmas can be true");
    }
    this.oneOf("time_shift_type", ["exponential", "linear"]);
    this.refuse("use_beta_sigmas", false);
    this.refuse("stochastic_sampling", false);
    // The training schedule: linspace(1, N, N) reversed, / N, in float32; shifted unless dynamic.
    const N = c.num_train_timesteps;
    const shift = f32(c.shift), shiftMinus1 = f32(c.shift - 1);
    const train = Array.from({ length: N }, (_, i) => {
      const s = f32(f32(N - i) / N);
      return c.use_dynamic_shifting ? s : f32(f32(shift * s) / f32(1 + f32(shiftMinus1 * s)));
    });
    this.sigmas = train;
    this.timesteps = train.map((s) => f32(s * N));
    this.sigmaMax = train[0];
    this.sigmaMin = train[N - 1];
  }

  /** Flow matching starts from unscaled noise. */
  get initNoiseSigma(): number { return 1.0; }

  /** The shift applied when use_dynamic_shifting is false. */
  get shift(): number { return this.c.shift; }

  /** Start stepping at `beginIndex` (the pipeline calls this with 0 before the loop). */
  setBeginIndex(beginIndex = 0): void { this.beginIndex = beginIndex; }

  /**
   * diffusers' set_timesteps: builds sigmas (from `sigmas`, `timesteps`, or an even spread between
   * sigma_max and sigma_min), shifts them (time_shift with `mu` when use_dynamic_shifting, else
   * `shift`), optionally stretches them to shift_terminal and converts to karras/exponential
   * spacing, then timesteps = sigmas · num_train_timesteps and a final 0 is appended to sigmas.
   * Throws when mu is missing with use_dynamic_shifting, or the lengths disagree.
   */
  override setTimesteps(numInferenceSteps?: number, opts: FlowMatchSetTimestepsOptions = {}): void {
    const c = this.c, N = c.num_train_timesteps;
    const name = "FlowMatchEulerDiscreteScheduler.setTimesteps";
    const mu = opts.mu;
    if (c.use_dynamic_shifting && mu === undefined) throw new Error(`${name}: mu must be passed when use_dynamic_shifting is true`);
    if (opts.sigmas && opts.timesteps && opts.sigmas.length !== opts.timesteps.length) throw new Error(`${name}: sigmas and timesteps must have the same length`);
    const custom = opts.sigmas ?? opts.timesteps;
    if (numInferenceSteps !== undefined && custom && custom.length !== numInferenceSteps) {
      throw new Error(`${name}: sigmas/timesteps have ${custom.length} entries but numInferenceSteps is ${numInferenceSteps}`);
    }
    const n = numInferenceSteps ?? custom?.length;
    if (n === undefined || !Number.isInteger(n) || n < 1) throw new Error(`${name}: numInferenceSteps must be a positive integer (or pass sigmas/timesteps), got ${n}`);
    this.numInferenceSteps = n;

    // Rounding of the array the shifts work on: float32 for given sigmas or timesteps, else float64.
    let r: (x: number) => number;
    let sig: number[];
    if (opts.sigmas) {
      r = f32;
      sig = opts.sigmas.map(f32);
    } else if (opts.timesteps) {
      r = f32;
      sig = opts.timesteps.map((t) => f32(f32(t) / N));
    } else {
      r = f64;
      sig = linspace(this.sigmaMax * N, this.sigmaMin * N, n).map((t) => t / N);
    }
    if (c.use_dynamic_shifting) {
      const e = r(c.time_shift_type === "exponential" ? Math.exp(mu!) : mu!);
      sig = sig.map((t) => r(e / r(e + r(r(r(1 / t) - 1) ** r(1.0)))));
    } else {
      const shift = r(c.shift), shiftMinus1 = r(c.shift - 1);
      sig = sig.map((s) => r(r(shift * s) / r(1 + r(shiftMinus1 * s))));
    }
    if (c.shift_terminal) {
      const oneMinus = sig.map((t) => r(1 - t));
      const scale = r(oneMinus[oneMinus.length - 1] / r(1 - c.shift_terminal));
      sig = oneMinus.map((z) => r(1 - r(z / scale)));
    }
    if (c.use_karras_sigmas || c.use_exponential_sigmas) {
      const sMin = typeof this.config.sigma_min === "number" ? this.config.sigma_min : sig[sig.length - 1];
      const sMax = typeof this.config.sigma_max === "number" ? this.config.sigma_max : sig[0];
      const ramp = linspace(0, 1, n);
      if (c.use_karras_sigmas) {
        const rho = 7.0, minInv = sMin ** (1 / rho), maxInv = sMax ** (1 / rho);
        sig = ramp.map((x) => (maxInv + x * (minInv - maxInv)) ** rho);
      } else {
        sig = linspace(Math.log(sMax), Math.log(sMin), n).map(Math.exp);
      }
    }
    sig = sig.map(f32);
    if (c.invert_sigmas) {
      sig = sig.map((s) => f32(1 - s));
      this.timesteps = sig.map((s) => f32(s * N));
      this.sigmas = [...sig, 1];
    } else {
      this.timesteps = sig.map((s) => f32(s * N));
      this.sigmas = [...sig, 0];
    }
    this.stepIndex = null;
    this.beginIndex = null;
  }

  /** The index of `timestep` in the schedule (the second match when it appears twice, as diffusers). */
  indexForTimestep(timestep: number): number {
    const matches = this.timesteps.flatMap((t, i) => (t === f32(timestep) ? [i] : []));
    if (matches.length === 0) throw new Error(`FlowMatchEulerDiscreteScheduler: timestep ${timestep} is not in the schedule [${this.timesteps.join(", ")}]`);
    return matches[matches.length > 1 ? 1 : 0];
  }

  /**
   * One Euler step: prev = sample + (sigma_next - sigma) · modelOutput, float32, same shape as
   * sample. `timestep` must be one of `timesteps` (it locates the step unless setBeginIndex was
   * called). Throws when stepping past the end of the schedule.
   */
  step(modelOutput: Tensor, timestep: number, sample: Tensor): SchedulerOutput {
    if (this.stepIndex === null) this.stepIndex = this.beginIndex ?? this.indexForTimestep(timestep);
    const i = this.stepIndex;
    if (i + 1 >= this.sigmas.length) throw new Error(`FlowMatchEulerDiscreteScheduler: step ${i} is past the ${this.timesteps.length}-step schedule; call setTimesteps again`);
    const dt = f32(this.sigmas[i + 1] - this.sigmas[i]);
    this.stepIndex = i + 1;
    return { prevSample: add(sample.to("float32"), mul(modelOutput.to("float32"), dt)) };
  }
}

registerScheduler("FlowMatchEulerDiscreteScheduler", FlowMatchEulerDiscreteScheduler);
