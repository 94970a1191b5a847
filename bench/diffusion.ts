/**
 * `npm run bench -- --pipeline DIR [--device D]`: a diffusers pipeline's speed at two sizes — the
 * pipeline's default (unet sample_size × VAE scale factor, square; FLUX: the VAE's sample_size) and
 * 1.5× as wide (rounded to a multiple of 16) — over 4 denoising steps with classifier-free guidance: seconds per denoising
 * step (steps 2-4, each synchronised by reading the latents) and seconds per image (the whole call:
 * prompt encoding, 4 steps, VAE decode). Each size is run once first as a warm-up.
 */
import { DiffusionPipeline, FluxPipeline, type StableDiffusionPipeline } from "../src/diffusers/index.js";

const STEPS = 4;

async function timeOne(pipe: DiffusionPipeline, height: number, width: number) {
  const run = async () => {
    const marks: number[] = [];
    const t0 = performance.now();
    const out = await pipe.call({
      prompt: "A painting of a squirrel eating a burger", height, width, numInferenceSteps: STEPS, guidanceScale: 7.5, seed: 0, outputType: "np",
      callbackOnStepEnd: async (_i, _t, latents) => { await latents.data(); marks.push(performance.now()); },
    });
    await (out.images as { data(): Promise<unknown> }).data();
    const end = performance.now();
    return { perStep: (marks[marks.length - 1] - marks[0]) / (marks.length - 1) / 1000, perImage: (end - t0) / 1000 };
  };
  await run(); // warm-up (shader compilation, first allocations)
  const r = await run();
  return { height, width, steps: STEPS, seconds_per_step: r.perStep, seconds_per_image: r.perImage };
}

/** The report for pipeline folder `dir` on `device`. */
export async function pipelineBench(dir: string, device: string): Promise<Record<string, unknown>> {
  const pipe = await DiffusionPipeline.fromPretrained(dir, { device });
  const loadPeakRss = process.resourceUsage().maxRSS * 1024;
  // FLUX has no unet: its VAE's sample_size is the default image size (1024 for FLUX.1).
  const base = pipe instanceof FluxPipeline ? (pipe.vae.config.sample_size as number) : (pipe as StableDiffusionPipeline).unet.sampleSize * (pipe as StableDiffusionPipeline).vaeScaleFactor;
  const wide = Math.round((base * 1.5) / 16) * 16;
  const sizes = [await timeOne(pipe, base, base), await timeOne(pipe, base, wide)];
  return { pipeline: pipe.constructor.name, sizes, load_peak_rss_bytes: loadPeakRss, peak_rss_bytes: process.resourceUsage().maxRSS * 1024 };
}
