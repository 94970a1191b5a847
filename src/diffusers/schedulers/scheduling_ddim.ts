/**
 * DDIMScheduler (diffusers' schedulers/scheduling_ddim.py), deterministic (eta = 0):
 *   x0 = (x_t − √(1−ᾱ_t)·ε) / √ᾱ_t          (epsilon; "sample" and "v_prediction" as diffusers)
 *   x_{t−Δ} = √ᾱ_{t−Δ}·x0 + √(1−ᾱ_{t−Δ})·ε,   Δ = num_train_timesteps / num_inference_steps
 * with ᾱ of a negative timestep = final_alpha_cumprod (1 when set_alpha_to_one, else ᾱ_0).
 * Timestep spacings "leading" (+ steps_offset), "trailing" and "linspace"; clip_sample clamps x0.
 */
import { maximum, minimum } from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { alphasCumprod, registerScheduler, SchedulerConfigError, SchedulerMixin, type SchedulerConfig, type SchedulerOutput } from "./scheduling_utils.js";
import { predictionToX0AndEps, spacedTimesteps } from "./timesteps.js";

const DEFAULTS: SchedulerConfig = {
  num_train_timesteps: 1000, beta_start: 0.0001, beta_end: 0.02, beta_schedule: "linear", trained_betas: null,
  clip_sample: true, set_alpha_to_one: true, steps_offset: 0, prediction_type: "epsilon", thresholding: false,
  dynamic_thresholding_ratio: 0.995, clip_sample_range: 1.0, sample_max_value: 1.0, timestep_spacing: "leading",
  rescale_betas_zero_snr: false,
};

export class DDIMScheduler extends SchedulerMixin {
  /** ᾱ_t for t = 0 … num_train_timesteps − 1 (float32 values). */
  readonly alphasCumprod: Float64Array;
  /** ᾱ used for the step that goes below t = 0. */
  readonly finalAlphaCumprod: number;

  /** Throws SchedulerConfigError for an unsupported beta schedule, spacing, prediction type or thresholding. */
  constructor(config: SchedulerConfig = {}) {
    super(config, DEFAULTS);
    this.alphasCumprod = alphasCumprod(this.config, "DDIMScheduler");
    this.finalAlphaCumprod = this.bool("set_alpha_to_one") ? 1 : this.alphasCumprod[0];
    this.oneOf("timestep_spacing", ["leading", "trailing", "linspace"]);
    this.oneOf("prediction_type", ["epsilon", "sample", "v_prediction"]);
    this.refuse("thresholding", false);
  }

  get initNoiseSigma(): number { return 1; }

  /** Integer timesteps, noisiest first (e.g. leading, 4 steps, offset 1: [751, 501, 251, 1]). */
  setTimesteps(numInferenceSteps: number): void {
    const N = this.num("num_train_timesteps");
    if (!Number.isInteger(numInferenceSteps) || numInferenceSteps < 1 || numInferenceSteps > N) {
      throw new RangeError(`DDIMScheduler: numInferenceSteps must be an integer in [1, ${N}] (num_train_timesteps), got ${numInferenceSteps}`);
    }
    this.numInferenceSteps = numInferenceSteps;
    this.timesteps = spacedTimesteps(this.str("timestep_spacing"), N, numInferenceSteps, this.num("steps_offset"), true);
  }

  /** ᾱ at timestep `t` (final_alpha_cumprod below 0). */
  alphaAt(t: number): number {
    return t >= 0 ? this.alphasCumprod[t] : this.finalAlphaCumprod;
  }

  step(modelOutput: Tensor, t: number, sample: Tensor): SchedulerOutput {
    if (this.numInferenceSteps === 0) throw new SchedulerConfigError("DDIMScheduler: call setTimesteps before step");
    const prevT = t - Math.floor(this.num("num_train_timesteps") / this.numInferenceSteps);
    const alphaT = this.alphaAt(t), alphaPrev = this.alphaAt(prevT);
    let { x0, eps } = predictionToX0AndEps(this.str("prediction_type"), modelOutput, sample, alphaT);
    if (this.bool("clip_sample")) {
      const r = this.num("clip_sample_range");
      x0 = minimum(maximum(x0, -r), r);
    }
    const prev = x0.mul(Math.fround(Math.sqrt(alphaPrev))).add(eps.mul(Math.fround(Math.sqrt(1 - alphaPrev))));
    return { prevSample: prev };
  }
}

registerScheduler("DDIMScheduler", DDIMScheduler);
