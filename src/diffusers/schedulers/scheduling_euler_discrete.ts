/**
 * EulerDiscreteScheduler (diffusers' schedulers/scheduling_euler_discrete.py; Karras et al. 2022,
 * Algorithm 2) without churn: σ_t = √((1−ᾱ_t)/ᾱ_t), interpolated linearly (or log-linearly) at the
 * inference timesteps, then a final σ of 0 ("zero") or σ_min ("sigma_min");
 *   model input = x / √(σ²+1);   x0 from the prediction;   x ← x + (x − x0)/σ · (σ_next − σ).
 * init_noise_sigma = σ_max for "linspace"/"trailing" spacing, else √(σ_max²+1).
 */
import type { Tensor } from "../../tensor/tensor.js";
import { alphasCumprod, linspace32, registerScheduler, SchedulerConfigError, SchedulerMixin, type SchedulerConfig, type SchedulerOutput } from "./scheduling_utils.js";
import { spacedTimesteps } from "./timesteps.js";

const DEFAULTS: SchedulerConfig = {
  num_train_timesteps: 1000, beta_start: 0.0001, beta_end: 0.02, beta_schedule: "linear", trained_betas: null,
  prediction_type: "epsilon", interpolation_type: "linear", use_karras_sigmas: false, use_exponential_sigmas: false,
  use_beta_sigmas: false, sigma_min: null, sigma_max: null, timestep_spacing: "linspace", timestep_type: "discrete",
  steps_offset: 0, rescale_betas_zero_snr: false, final_sigmas_type: "zero",
};

export class EulerDiscreteScheduler extends SchedulerMixin {
  readonly alphasCumprod: Float64Array;
  /** σ per inference step, then the final σ (length numInferenceSteps + 1; float32 values). */
  sigmas: number[] = [];
  private stepIndex = 0;

  /** Throws SchedulerConfigError for options this implementation does not support. */
  constructor(config: SchedulerConfig = {}) {
    super(config, DEFAULTS);
    this.alphasCumprod = alphasCumprod(this.config, "EulerDiscreteScheduler");
    this.oneOf("timestep_spacing", ["leading", "trailing", "linspace"]);
    this.oneOf("prediction_type", ["epsilon", "sample", "v_prediction"]);
    this.oneOf("interpolation_type", ["linear", "log_linear"]);
    this.oneOf("final_sigmas_type", ["zero", "sigma_min"]);
    this.oneOf("timestep_type", ["discrete"]);
    for (const k of ["use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas"]) this.refuse(k, false);
    // Before setTimesteps, the schedule covers every training step (as diffusers' __init__).
    this.setSchedule(Array.from({ length: this.num("num_train_timesteps") }, (_, i) => this.num("num_train_timesteps") - 1 - i));
  }

  get initNoiseSigma(): number {
    const max = Math.max(...this.sigmas);
    return ["linspace", "trailing"].includes(this.str("timestep_spacing")) ? max : Math.fround(Math.sqrt(max * max + 1));
  }

  /** Float timesteps (noisiest first) and their σ. Throws RangeError for a bad count. */
  setTimesteps(numInferenceSteps: number): void {
    const N = this.num("num_train_timesteps");
    if (!Number.isInteger(numInferenceSteps) || numInferenceSteps < 1 || numInferenceSteps > N) {
      throw new RangeError(`EulerDiscreteScheduler: numInferenceSteps must be an integer in [1, ${N}] (num_train_timesteps), got ${numInferenceSteps}`);
    }
    this.numInferenceSteps = numInferenceSteps;
    this.setSchedule(spacedTimesteps(this.str("timestep_spacing"), N, numInferenceSteps, this.num("steps_offset"), false));
  }

  private setSchedule(timesteps: number[]): void {
    const full = Array.from(this.alphasCumprod, (a) => Math.fround(Math.sqrt((1 - a) / a)));
    let sigmas: number[];
    if (this.str("interpolation_type") === "linear") {
      sigmas = timesteps.map((t) => {
        const i = Math.min(Math.max(Math.floor(t), 0), full.length - 2);
        const f = t - i;
        return Math.fround(full[i] + (full[i + 1] - full[i]) * f);
      });
    } else {
      const n = timesteps.length;
      sigmas = Array.from(linspace32(Math.log(full[full.length - 1]), Math.log(full[0]), n + 1), (v) => Math.fround(Math.exp(v))).slice(0, n);
    }
    const final = this.str("final_sigmas_type") === "zero" ? 0 : full[0];
    this.sigmas = [...sigmas, final];
    this.timesteps = timesteps.map(Math.fround);
    this.stepIndex = 0;
  }

  /** sample / √(σ² + 1) with σ of the current step. */
  override scaleModelInput(sample: Tensor, _t: number): Tensor {
    const s = this.sigmas[this.stepIndex];
    return sample.div(Math.fround(Math.sqrt(Math.fround(s * s) + 1)));
  }

  step(modelOutput: Tensor, _t: number, sample: Tensor): SchedulerOutput {
    if (this.stepIndex >= this.sigmas.length - 1) throw new SchedulerConfigError("EulerDiscreteScheduler: step called more often than setTimesteps' step count");
    const sigma = this.sigmas[this.stepIndex];
    const prediction = this.str("prediction_type");
    let x0: Tensor;
    if (prediction === "epsilon") x0 = sample.sub(modelOutput.mul(sigma));
    else if (prediction === "sample") x0 = modelOutput;
    else x0 = modelOutput.mul(Math.fround(-sigma / Math.sqrt(sigma * sigma + 1))).add(sample.div(Math.fround(sigma * sigma + 1)));
    const derivative = sample.sub(x0).div(sigma);
    const dt = Math.fround(this.sigmas[this.stepIndex + 1] - sigma);
    this.stepIndex++;
    return { prevSample: sample.add(derivative.mul(dt)) };
  }
}

registerScheduler("EulerDiscreteScheduler", EulerDiscreteScheduler);
