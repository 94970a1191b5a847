/**
 * FluxPipeline (diffusers' pipelines/flux/pipeline_flux.py), text-to-image with FLUX.1:
 *
 *   pooled = CLIP(tokenize(prompt, pad to 77)).pooler_output
 *   states = T5(tokenize(prompt_2 ?? prompt, pad to max_sequence_length))     (no attention mask)
 *   latents [B, (h/2)(w/2), 4C]: 2x2 patches of the latent image packed into tokens (given, or
 *            N(0, 1) from `seed` drawn as [B, C, h, w] and packed); image ids (0, row, col), text ids 0
 *   sigmas = linspace(1, 1/n, n), shifted by mu = calculate_shift(image tokens)
 *   for t in timesteps: v = transformer(latents, t/1000, guidance, pooled, states); latents += dσ · v
 *   image = vae.decode(unpack(latents) / scaling_factor + shift_factor) -> clamp(image/2 + 0.5, 0, 1)
 *
 * The guidance scale enters as the transformer's guidance embedding (FLUX.1-dev); there is no
 * classifier-free guidance batch. A seed gives the same image on every run and device, but not
 * PyTorch's (tsorch does not reproduce torch's random numbers).
 */
import { tidy } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { CLIPTextModel } from "../../transformers/models/clip_text.js";
import { T5EncoderModel } from "../../transformers/models/t5_encoder.js";
import type { PreTrainedTokenizer } from "../../transformers/tokenization.js";
import { loadTokenizer } from "../components.js";
import { denormalizeToNHWC, numpyToPil } from "../image_processor.js";
import type { AutoencoderKL } from "../models/autoencoder_kl.js";
import { timestepTensor } from "../models/embeddings.js";
import { FluxTransformer2DModel } from "../models/transformer_flux.js";
import { checkCallOptions, DiffusionPipeline, loadModelComponent, registerComponent, registerPipeline, type DiffusionCallOptions, type DiffusionOutput } from "../pipeline_utils.js";
import { calculateShift, FlowMatchEulerDiscreteScheduler, linspace } from "../schedulers/scheduling_flow_match_euler_discrete.js";
import { randn } from "../randn.js";

/**
 * Arguments of {@link FluxPipeline.call}: the common ones with FLUX's defaults (height and width
 * 128 · vae scale factor, multiples of 2 · vae scale factor; numInferenceSteps 28; guidanceScale
 * 3.5, the guidance embedding's value, unused without guidance_embeds), and FLUX's own.
 * `latents`: packed [B, (h/2)·(w/2), 4·C] as diffusers takes them, or unpacked [B, C, h, w] (a
 * randn draw), used unscaled; callbackOnStepEnd and outputType "latent" see packed latents.
 */
export interface FluxCallOptions extends DiffusionCallOptions {
  /** The T5 prompt; default: `prompt`. */
  prompt2?: string | string[];
  /** Custom sigmas, one per step; default linspace(1, 1/n, n). */
  sigmas?: number[];
  /** T5 tokens (padded/truncated to this); default 512, at most 512. */
  maxSequenceLength?: number;
}

/**
 * Ids of `text` as a diffusers pipeline makes them: special tokens added, truncated to `max`
 * (keeping the final special token, as the tokenizers' truncation does) and padded with `pad`.
 */
function padded(tok: PreTrainedTokenizer, text: string, max: number, pad: number): number[] {
  let ids = tok.encode(text);
  if (ids.length > max) ids = [...ids.slice(0, max - 1), ids[ids.length - 1]];
  return [...ids, ...new Array<number>(max - ids.length).fill(pad)];
}

/** FluxPipeline._pack_latents: [B, C, h, w] -> [B, (h/2)(w/2), 4C] (each 2x2 patch one token, channel-major). */
export function packLatents(latents: Tensor): Tensor {
  const [B, C, h, w] = latents.shape;
  return latents.reshape(B, C, h / 2, 2, w / 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(B, (h / 2) * (w / 2), C * 4);
}

/** FluxPipeline._unpack_latents: [B, (h/2)(w/2), 4C] -> [B, C, h, w]. */
export function unpackLatents(latents: Tensor, h: number, w: number): Tensor {
  const [B, , ch] = latents.shape;
  return latents.reshape(B, h / 2, w / 2, ch / 4, 2, 2).permute(0, 3, 1, 4, 2, 5).reshape(B, ch / 4, h, w);
}

/** FluxPipeline._prepare_latent_image_ids: (0, row, col) of each packed token, row-major, [(h/2)(w/2)][3]. */
export function latentImageIds(packedHeight: number, packedWidth: number): number[][] {
  return Array.from({ length: packedHeight * packedWidth }, (_, i) => [0, Math.floor(i / packedWidth), i % packedWidth]);
}

export class FluxPipeline extends DiffusionPipeline {
  get transformer(): FluxTransformer2DModel { return this.component("transformer"); }
  protected get denoiser(): FluxTransformer2DModel { return this.transformer; }
  get vae(): AutoencoderKL { return this.component("vae"); }
  get textEncoder(): CLIPTextModel { return this.component("text_encoder"); }
  get tokenizer(): PreTrainedTokenizer { return this.component("tokenizer"); }
  get textEncoder2(): T5EncoderModel { return this.component("text_encoder_2"); }
  get tokenizer2(): PreTrainedTokenizer { return this.component("tokenizer_2"); }
  /** Pixels per latent pixel (2^(VAE blocks − 1)); images are packed 2x2 on top of it. */
  get vaeScaleFactor(): number { return this.vae.scaleFactor; }

  /** CLIP ids of `texts`, padded/truncated to the tokenizer's model_max_length (77). */
  clipIds(texts: string[]): number[][] {
    const tok = this.tokenizer;
    const max = Math.min(tok.modelMaxLength, this.textEncoder.c.maxPositionEmbeddings);
    const pad = tok.padTokenId ?? tok.eosTokenId;
    if (pad === undefined) throw new Error("FluxPipeline: the CLIP tokenizer has neither a pad nor an eos token to pad with");
    return texts.map((t) => padded(tok, t, max, pad));
  }

  /** T5 ids of `texts`, padded (with the pad token) / truncated to `maxSequenceLength`. */
  t5Ids(texts: string[], maxSequenceLength: number): number[][] {
    const pad = this.tokenizer2.padTokenId;
    if (pad === undefined) throw new Error("FluxPipeline: the T5 tokenizer (tokenizer_2) has no pad token");
    return texts.map((t) => padded(this.tokenizer2, t, maxSequenceLength, pad));
  }

  /**
   * encode_prompt: CLIP pooled embeddings [B, clip hidden] of `prompt` and T5 states
   * [B, maxSequenceLength, d_model] of `prompt2` (default `prompt`).
   */
  encodePrompt(prompt: string[], prompt2: string[] = prompt, maxSequenceLength = 512): { promptEmbeds: Tensor; pooledPromptEmbeds: Tensor } {
    const pooledPromptEmbeds = tidy(() => this.textEncoder.forward(this.clipIds(prompt)).poolerOutput);
    const t5 = this.textEncoder2;
    const ids = this.t5Ids(prompt2, maxSequenceLength);
    t5.checkIds(ids);
    const promptEmbeds = tidy(() => t5.encode(t5.idsTensor(ids)));
    return { promptEmbeds, pooledPromptEmbeds };
  }

  /**
   * Generate images. Throws RangeError for a height/width that is not a positive multiple of
   * 2 · vae scale factor (the VAE's downsampling times the 2x2 packing), latents of the wrong shape
   * or device, prompt_2 of another batch size, max_sequence_length outside [1, 512], a bad step
   * count or custom sigmas of the wrong length; Error when the scheduler is not flow-matching.
   */
  async call(o: FluxCallOptions): Promise<DiffusionOutput> {
    checkCallOptions("FluxPipeline", o, ["prompt2", "sigmas", "maxSequenceLength"]);
    const name = "FluxPipeline";
    const s = this.vaeScaleFactor;
    const height = o.height ?? 128 * s, width = o.width ?? 128 * s;
    for (const [what, v] of [["height", height], ["width", width]] as const) {
      if (!Number.isInteger(v) || v <= 0 || v % (2 * s) !== 0) {
        throw new RangeError(`${name}: ${what} must be a positive multiple of ${2 * s} (VAE scale factor ${s} x 2x2 latent packing), got ${v}`);
      }
    }
    const maxLen = o.maxSequenceLength ?? 512;
    if (!Number.isInteger(maxLen) || maxLen < 1 || maxLen > 512) throw new RangeError(`${name}: maxSequenceLength must be an integer in [1, 512], got ${maxLen}`);
    const steps = o.numInferenceSteps ?? 28;
    if (!Number.isInteger(steps) || steps < 1) throw new RangeError(`${name}: numInferenceSteps must be a positive integer, got ${steps}`);
    const prompts = Array.isArray(o.prompt) ? o.prompt : [o.prompt];
    const prompts2 = o.prompt2 === undefined ? prompts : Array.isArray(o.prompt2) ? o.prompt2 : [o.prompt2];
    if (prompts2.length !== prompts.length) throw new RangeError(`${name}: ${prompts2.length} prompt2 entries for ${prompts.length} prompts`);
    const scheduler = this.scheduler;
    if (!(scheduler instanceof FlowMatchEulerDiscreteScheduler)) {
      throw new Error(`${name} needs a flow-matching scheduler (FlowMatchEulerDiscreteScheduler), got ${scheduler.constructor.name}`);
    }

    const transformer = this.transformer;
    const B = prompts.length, C = transformer.c.in_channels / 4;
    const h = height / s, w = width / s;
    const N = (h / 2) * (w / 2);
    const device = transformer.device;
    const shape = [B, N, C * 4], unpacked = [B, C, h, w];
    const is = (t: Tensor, want: number[]) => t.ndim === want.length && t.shape.every((d, i) => d === want[i]);
    if (o.latents && !is(o.latents, shape) && !is(o.latents, unpacked)) {
      throw new RangeError(`${name}: latents must be packed [${shape}] or unpacked [${unpacked}] for ${height}x${width}, got [${o.latents.shape}]`);
    }
    if (o.latents && o.latents.device !== device) throw new RangeError(`${name}: latents are on ${o.latents.device.name}, the pipeline on ${device.name}`);

    const { promptEmbeds, pooledPromptEmbeds } = this.encodePrompt(prompts, prompts2, maxLen);
    const txtIds = Array.from({ length: maxLen }, () => [0, 0, 0]);
    const imgIds = latentImageIds(h / 2, w / 2);
    const rope = transformer.rotaryEmbedding(txtIds, imgIds, device);
    const given = o.latents;
    transformer.timeTextEmbed.sinusoid.prepare(device);
    let latents = tidy(() => given ? (given.ndim === 4 ? packLatents(given.to("float32")) : given.to("float32")) : packLatents(randn(unpacked, o.seed, device)));

    const sigmas = o.sigmas ?? linspace(1.0, 1 / steps, steps);
    const cfg = scheduler.config;
    const mu = calculateShift(N, cfg.base_image_seq_len as number, cfg.max_image_seq_len as number, cfg.base_shift as number, cfg.max_shift as number);
    scheduler.setTimesteps(steps, { sigmas, mu });
    scheduler.setBeginIndex(0);
    const guidance = transformer.c.guidance_embeds ? o.guidanceScale ?? 3.5 : null;
    for (const [i, t] of scheduler.timesteps.entries()) {
      const x = latents;
      latents = tidy(() => {
        const v = this.denoise({
          hiddenStates: x, encoderHiddenStates: promptEmbeds, pooledProjections: pooledPromptEmbeds,
          timestep: timestepTensor(Math.fround(t / 1000), device), guidance, imageRotaryEmb: rope,
        });
        return scheduler.step(v, t, x).prevSample;
      });
      await o.callbackOnStepEnd?.(i, t, latents);
    }
    if (o.outputType === "latent") return { images: latents };
    const final = latents;
    const vae = this.vae;
    const image = tidy(() => denormalizeToNHWC(this.decodeLatents(unpackLatents(final, h, w).div(vae.scalingFactor).add(vae.shiftFactor))));
    return { images: o.outputType === "np" ? image : await numpyToPil(image) };
  }
}

registerComponent("FluxTransformer2DModel", (ctx) => loadModelComponent(ctx, (config) => new FluxTransformer2DModel(config)));
registerComponent("T5EncoderModel", (ctx) => loadModelComponent(ctx, (config) => new T5EncoderModel(config)));
registerComponent("T5Tokenizer", loadTokenizer);
registerComponent("T5TokenizerFast", loadTokenizer);
registerPipeline("FluxPipeline", FluxPipeline);
