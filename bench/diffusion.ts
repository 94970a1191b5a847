/**
 * `npm run bench -- --pipeline DIR [--device D] [--steps N] [--sizes HxW,HxW] [--peer-python PATH] [--compile]`:
 * a diffusers pipeline's speed, by default at two sizes — the pipeline's default (unet
 * sample_size × VAE scale factor, square; FLUX: the VAE's sample_size) and 1.5× as wide (rounded to a multiple of 16) — over 4
 * denoising steps with classifier-free guidance: seconds per denoising step (steps 2.., each
 * synchronised by reading the latents) and seconds per image (the whole call: prompt encoding, the
 * steps, VAE decode). Each size first runs one step and the decode as a warm-up (compiled: this compiles both graphs). With
 * --peer-python (torch + diffusers, bench/diffusion_peer.py) the same workload runs in PyTorch in
 * the same run and the report adds tsorch / PyTorch ratios. With --compile the same sizes then run
 * again after `pipe.compile()` (each size's first compiled call compiles; its timed call replays)
 * and the report puts compiled and eager seconds side by side.
 */
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { compiler } from "../src/compile/index.js";
import { DiffusionPipeline, FluxPipeline, type StableDiffusionPipeline } from "../src/diffusers/index.js";

const PROMPT = "A painting of a squirrel eating a burger";

interface SizeResult { height: number; width: number; steps: number; seconds_per_step: number; seconds_per_image: number }

async function timeOne(pipe: DiffusionPipeline, height: number, width: number, steps: number): Promise<SizeResult> {
  await pipe.call({ prompt: PROMPT, height, width, numInferenceSteps: 1, guidanceScale: 7.5, seed: 0, outputType: "np" });
  const marks: number[] = [];
  const t0 = performance.now();
  const out = await pipe.call({
    prompt: PROMPT, height, width, numInferenceSteps: steps, guidanceScale: 7.5, seed: 0, outputType: "np",
    callbackOnStepEnd: async (_i, _t, latents) => { await latents.data(); marks.push(performance.now()); },
  });
  await (out.images as { data(): Promise<unknown> }).data();
  const end = performance.now();
  const perStep = marks.length > 1 ? (marks[marks.length - 1] - marks[0]) / (marks.length - 1) : marks[0] - t0;
  return { height, width, steps, seconds_per_step: perStep / 1000, seconds_per_image: (end - t0) / 1000 };
}

/** "HxW,HxW" -> sizes; throws naming the bad entry. */
export function parseSizes(text: string): [number, number][] {
  return text.split(",").map((s) => {
    const m = /^(\d+)x(\d+)$/.exec(s.trim());
    if (!m) throw new Error(`--sizes expects HxW[,HxW...], got '${s}'`);
    return [Number(m[1]), Number(m[2])];
  });
}

/** The report for pipeline folder `dir` on `device` (see the file comment). */
export async function pipelineBench(dir: string, device: string, threads: number, o: { steps?: number; sizes?: [number, number][]; peerPython?: string; compile?: boolean } = {}): Promise<Record<string, unknown>> {
  const steps = o.steps ?? 4;
  const pipe = await DiffusionPipeline.fromPretrained(dir, { device });
  const loadPeakRss = process.resourceUsage().maxRSS * 1024;
  // FLUX has no unet: its VAE's sample_size is the default image size (1024 for FLUX.1).
  const base = pipe instanceof FluxPipeline ? (pipe.vae.config.sample_size as number) : (pipe as StableDiffusionPipeline).unet.sampleSize * (pipe as StableDiffusionPipeline).vaeScaleFactor;
  const sizes = o.sizes ?? [[base, base], [base, Math.round((base * 1.5) / 16) * 16]];
  const tsorch: SizeResult[] = [];
  for (const [h, w] of sizes) tsorch.push(await timeOne(pipe, h, w, steps));
  const report: Record<string, unknown> = { pipeline: pipe.constructor.name, tsorch, load_peak_rss_bytes: loadPeakRss, peak_rss_bytes: process.resourceUsage().maxRSS * 1024 };
  if (o.compile) {
    await pipe.compile();
    const compiled: SizeResult[] = [];
    for (const [h, w] of sizes) compiled.push(await timeOne(pipe, h, w, steps));
    report.compiled_vs_eager = compiled.map((r, i) => ({
      height: r.height, width: r.width, seconds_per_image: { compiled: r.seconds_per_image, eager: tsorch[i].seconds_per_image },
      seconds_per_step: { compiled: r.seconds_per_step, eager: tsorch[i].seconds_per_step }, speedup_per_image: tsorch[i].seconds_per_image / r.seconds_per_image,
    }));
    report.compiler_stats = compiler.stats();
    report.peak_rss_bytes = process.resourceUsage().maxRSS * 1024;
  }
  if (o.peerPython) {
    const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../bench/diffusion_peer.py");
    const out = execFileSync(o.peerPython, [script, dir, String(threads), String(steps), sizes.map(([h, w]) => `${h}x${w}`).join(",")],
      { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
    const peer = JSON.parse(out.trim().split("\n").at(-1)!) as { torch: string; sizes: SizeResult[] };
    report.pytorch = peer;
    report.ratio_tsorch_over_pytorch = tsorch.map((r, i) => ({
      height: r.height, width: r.width,
      seconds_per_step: r.seconds_per_step / peer.sizes[i].seconds_per_step, seconds_per_image: r.seconds_per_image / peer.sizes[i].seconds_per_image,
    }));
  }
  return report;
}
