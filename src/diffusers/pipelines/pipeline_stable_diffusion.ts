/**
 * StableDiffusionPipeline (diffusers' pipelines/stable_diffusion/pipeline_stable_diffusion.py),
 * text-to-image:
 *
 *   CLIP(tokenize(prompt, pad to 77)) and CLIP(negative prompt) -> [uncond, cond] embeddings
 *   latents (given, or N(0, 1) from `seed`) · init_noise_sigma
 *   for t in scheduler.timesteps:
 *     ε = unet(scale_model_input([x, x]), t, [uncond; cond]);  ε = ε_u + g·(ε_c − ε_u)
 *     x = scheduler.step(ε, t, x)                                (callbackOnStepEnd(i, t, x))
 *   image = vae.decode(x / scaling_factor) -> clamp(image/2 + 0.5, 0, 1)
 *
 * Classifier-free guidance runs when guidanceScale > 1. A seed gives the same image on every run
 * and device, but not PyTorch's (tsorch does not reproduce torch's random numbers).
 */
import type { PreTrainedTokenizer } from "../../transformers/tokenization.js";
import type { CLIPTextModel } from "../../transformers/models/clip_text.js";
import { add, cat, mul, sub, tidy } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";
import { denormalizeToNHWC, numpyToPil } from "../image_processor.js";
import { randn } from "../randn.js";
import { FlowMatchEulerDiscreteScheduler } from "../schedulers/scheduling_flow_match_euler_discrete.js";
import type { AutoencoderKL } from "../models/autoencoder_kl.js";
import { timestepTensor } from "../models/embeddings.js";
import type { UNet2DConditionModel } from "../models/unet_2d_condition.js";
import { checkCallOptions, DiffusionPipeline, registerPipeline, type DiffusionCallOptions, type DiffusionOutput } from "../pipeline_utils.js";

/** Arguments of {@link StableDiffusionPipeline.call}: the common ones, SD's defaults, and a negative prompt. */
export interface StableDiffusionCallOptions extends DiffusionCallOptions {
  /** Default "" (the unconditional embedding). */
  negativePrompt?: string | string[];
  /** Default unet sample_size · vae scale factor; multiples of 8. numInferenceSteps default 50, guidanceScale 7.5 (guidance when > 1). */
  height?: number;
}

export class StableDiffusionPipeline extends DiffusionPipeline {
  get unet(): UNet2DConditionModel { return this.component("unet"); }
  protected get denoiser(): UNet2DConditionModel { return this.unet; }
  get vae(): AutoencoderKL { return this.component("vae"); }
  get textEncoder(): CLIPTextModel { return this.component("text_encoder"); }
  get tokenizer(): PreTrainedTokenizer { return this.component("tokenizer"); }
  /** Pixels per latent pixel (2^(VAE blocks − 1)). */
  get vaeScaleFactor(): number { return this.vae.scaleFactor; }

  /** CLIP ids of `texts` as the pipeline makes them: special tokens, truncated and padded to model_max_length (77). */
  tokenize(texts: string[]): number[][] {
    const tok = this.tokenizer;
    const max = Math.min(tok.modelMaxLength, this.textEncoder.c.maxPositionEmbeddings);
    const pad = tok.padTokenId ?? tok.eosTokenId;
    if (pad === undefined) throw new Error("StableDiffusionPipeline: the tokenizer has neither a pad nor an eos token to pad with");
    return texts.map((t) => {
      let ids = tok.encode(t);
      if (ids.length > max) ids = [...ids.slice(0, max - 1), ids[ids.length - 1]];
      return [...ids, ...new Array(max - ids.length).fill(pad)];
    });
  }

  /** Text embeddings [B, 77, hidden] (last_hidden_state, no attention mask) of `texts`. */
  encodePrompt(texts: string[]): Tensor {
    return this.textEncoder.forward(this.tokenize(texts)).lastHiddenState;
  }

  /**
   * Generate images. Throws RangeError for a height/width that is not a positive multiple of 8,
   * latents of the wrong shape or device, a negative prompt batch that does not match the prompt's,
   * or a bad step count.
   */
  async call(o: StableDiffusionCallOptions): Promise<DiffusionOutput> {
    checkCallOptions("StableDiffusionPipeline", o, ["negativePrompt"]);
    const s = this.vaeScaleFactor;
    const height = o.height ?? this.unet.sampleSize * s, width = o.width ?? this.unet.sampleSize * s;
    for (const [name, v] of [["height", height], ["width", width]] as const) {
      if (!Number.isInteger(v) || v <= 0 || v % 8 !== 0) throw new RangeError(`StableDiffusionPipeline: ${name} must be a positive multiple of 8, got ${v}`);
    }
    const prompts = Array.isArray(o.prompt) ? o.prompt : [o.prompt];
    const negatives = o.negativePrompt === undefined ? prompts.map(() => "") : Array.isArray(o.negativePrompt) ? o.negativePrompt : [o.negativePrompt];
    if (negatives.length !== prompts.length) throw new RangeError(`StableDiffusionPipeline: ${negatives.length} negative prompts for ${prompts.length} prompts`);
    const B = prompts.length;
    const guidance = o.guidanceScale ?? 7.5;
    const cfg = guidance > 1;
    const steps = o.numInferenceSteps ?? 50;
    const device = this.unet.device;
    const shape = [B, this.unet.inChannels, height / s, width / s];
    if (o.latents && (o.latents.shape.length !== 4 || o.latents.shape.some((d, i) => d !== shape[i]))) {
      throw new RangeError(`StableDiffusionPipeline: latents must have shape [${shape}], got [${o.latents.shape}]`);
    }
    if (o.latents && o.latents.device !== device) throw new RangeError(`StableDiffusionPipeline: latents are on ${o.latents.device.name}, the pipeline on ${device.name}`);

    const scheduler = this.scheduler;
    // The UNet predicts noise (epsilon / v): a flow-matching schedule would give a silent wrong image.
    if (scheduler instanceof FlowMatchEulerDiscreteScheduler) {
      throw new Error("StableDiffusionPipeline needs a noise-prediction scheduler (DDIMScheduler, EulerDiscreteScheduler), got FlowMatchEulerDiscreteScheduler");
    }
    scheduler.setTimesteps(steps);
    const context = tidy(() => {
      const cond = this.encodePrompt(prompts);
      return cfg ? cat([this.encodePrompt(negatives), cond], 0) : cond;
    });
    let latents = tidy(() => (o.latents ?? randn(shape, o.seed, device)).to("float32").mul(scheduler.initNoiseSigma));
    this.unet.timeProj.prepare(device);
    for (const [i, t] of scheduler.timesteps.entries()) {
      const x = latents;
      latents = tidy(() => {
        const input = scheduler.scaleModelInput(cfg ? cat([x, x], 0) : x, t);
        const eps = this.denoise(input, timestepTensor(t, device), context);
        let noise = eps;
        if (cfg) {
          const [u, c] = eps.chunk(2, 0);
          noise = add(u, mul(sub(c, u), guidance));
        }
        return scheduler.step(noise, t, x).prevSample;
      });
      await o.callbackOnStepEnd?.(i, t, latents);
    }
    if (o.outputType === "latent") return { images: latents };
    const final = latents;
    const image = tidy(() => denormalizeToNHWC(this.decodeLatents(final.div(this.vae.scalingFactor))));
    return { images: o.outputType === "np" ? image : await numpyToPil(image) };
  }
}

registerPipeline("StableDiffusionPipeline", StableDiffusionPipeline);
