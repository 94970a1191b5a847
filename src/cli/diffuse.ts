/**
 * `tsorch diffuse`: load a diffusers pipeline (folder or Hub id), generate one image from a prompt
 * with a progress bar over the denoising steps on stderr, and write it as a PNG.
 */
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import cliProgress from "cli-progress";
import { deviceTypes } from "../devices/registry.js";
import { DiffusionPipeline, schedulerClass, type DiffusionCallOptions, type PipelineImage } from "../diffusers/index.js";
import type { Device } from "../devices/device.js";
import { readSafetensors } from "../hub/index.js";
import { fromBytes } from "../tensor/creation.js";
import type { Tensor } from "../tensor/tensor.js";
import { numberFlag, parseFlags, UsageError } from "./args.js";

export const DIFFUSE_USAGE = `usage: tsorch diffuse --model DIR_OR_HUB_ID --prompt TEXT --output image.png [options]
  --negative-prompt TEXT   (pipelines with classifier-free guidance, e.g. Stable Diffusion)
  --height H --width W     pixels (default: the pipeline's)
  --steps N                denoising steps (default: the pipeline's, 50 for Stable Diffusion)
  --guidance-scale G       (default: the pipeline's, 7.5 for Stable Diffusion)
  --scheduler ddim|euler|flow-match-euler   replace the pipeline's scheduler (built from its config)
  --max-sequence-length N  T5 tokens of FLUX's prompt (default 512)
  --seed S                 seed of the initial noise (tsorch's generator: not PyTorch's numbers)
  --latents FILE           initial latents instead: the tensor "latents" of a .safetensors file
                           (e.g. a diffusers run's randn draw, to reproduce its image)
  --device cpu|webgpu  --dtype auto|float32|float16|bfloat16   (weights)
  --compile                compile the denoiser and the VAE decoder (pipe.compile())
A progress bar over the steps is drawn on stderr when it is a terminal.`;

const SCHEDULERS: Record<string, string> = {
  ddim: "DDIMScheduler", euler: "EulerDiscreteScheduler", "flow-match-euler": "FlowMatchEulerDiscreteScheduler",
};
const DTYPES = ["auto", "float32", "float16", "bfloat16"];

const FLAGS = {
  model: { type: "string" }, prompt: { type: "string" }, "negative-prompt": { type: "string" }, height: { type: "string" },
  width: { type: "string" }, steps: { type: "string" }, "guidance-scale": { type: "string" }, scheduler: { type: "string" },
  seed: { type: "string" }, latents: { type: "string" }, "max-sequence-length": { type: "string" }, device: { type: "string" }, dtype: { type: "string" }, output: { type: "string" }, revision: { type: "string" },
  compile: { type: "boolean" },
} as const;

/** Run `tsorch diffuse` with `argv` (after the command name). Throws UsageError for bad flags. */
export async function diffuseCommand(argv: string[]): Promise<void> {
  const v = parseFlags(argv, FLAGS);
  for (const f of ["model", "prompt", "output"] as const) if (typeof v[f] !== "string") throw new UsageError(`--${f} is required\n${DIFFUSE_USAGE}`);
  const sched = v.scheduler as string | undefined;
  if (sched !== undefined && !SCHEDULERS[sched]) throw new UsageError(`--scheduler must be one of ${Object.keys(SCHEDULERS).join(", ")}, got '${sched}'`);
  const dtype = v.dtype as string | undefined;
  if (dtype !== undefined && !DTYPES.includes(dtype)) throw new UsageError(`--dtype must be one of ${DTYPES.join(", ")}, got '${dtype}'`);
  const device = (v.device as string | undefined) ?? "cpu";
  if (!deviceTypes().includes(device.split(":")[0])) throw new UsageError(`--device: unknown device '${device}'; available: ${deviceTypes().join(", ")}`);
  const output = v.output as string;
  if (!output.toLowerCase().endsWith(".png")) throw new UsageError(`--output must name a .png file, got '${output}'`);
  if (!existsSync(dirname(resolve(output)))) throw new UsageError(`--output: no such folder: ${dirname(resolve(output))}`);
  const opts: DiffusionCallOptions & { negativePrompt?: string; maxSequenceLength?: number } = {
    prompt: v.prompt as string,
    height: numberFlag(v, "height", true), width: numberFlag(v, "width", true),
    numInferenceSteps: numberFlag(v, "steps", true), guidanceScale: numberFlag(v, "guidance-scale"), seed: numberFlag(v, "seed", true),
    outputType: "pil",
  };
  if (v["negative-prompt"] !== undefined) opts.negativePrompt = v["negative-prompt"] as string;
  if (v["max-sequence-length"] !== undefined) opts.maxSequenceLength = numberFlag(v, "max-sequence-length", true);

  const pipe = await DiffusionPipeline.fromPretrained(v.model as string, { device, dtype, revision: v.revision as string | undefined });
  if (sched) pipe.scheduler = new (schedulerClass(SCHEDULERS[sched]))(pipe.scheduler.config);
  if (typeof v.latents === "string") opts.latents = readLatents(v.latents, pipe.device);
  if (v.compile === true) await pipe.compile();
  const bar = new cliProgress.SingleBar({ stream: process.stderr, format: "denoising [{bar}] {value}/{total} steps | {duration_formatted} elapsed | eta {eta_formatted}" }, cliProgress.Presets.shades_classic);
  let started = false;
  opts.callbackOnStepEnd = (step) => {
    if (!started) {
      bar.start(pipe.scheduler.timesteps.length, 0);
      started = true;
    }
    bar.update(step + 1);
  };
  try {
    const out = await pipe.call(opts);
    const [image] = out.images as PipelineImage[];
    await image.save(output);
  } finally {
    if (started) bar.stop();
  }
  process.stdout.write(`${output}\n`);
}

/** The tensor "latents" of safetensors `file`, as float32 on `device`. Throws naming the file when absent. */
function readLatents(file: string, device: Device): Tensor {
  const raw = readSafetensors(file).get("latents");
  if (!raw || !["float32", "float16", "bfloat16"].includes(raw.dtype)) throw new UsageError(`--latents: ${file} has no floating tensor named "latents"`);
  return fromBytes(raw.bytes, raw.dtype as "float32", raw.shape, "cpu").to(device, "float32");
}
