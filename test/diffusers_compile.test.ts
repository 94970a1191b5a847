/**
 * `pipe.compile()` on the diffusers fixtures (../shared/fixtures/diffusers/sd_tiny and flux_tiny):
 * the first image of a size compiles the denoiser and the VAE decoder (no graph break), every
 * later step and image of that size replays them (torch.compiler.stats() cacheHits, no new
 * compiles), a second size compiles once more; compiled images equal eager within 1e-5 on cpu
 * (1e-4 on webgpu) and the fixture's diffusers image within 1e-4 (1e-3 on webgpu).
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import { compiler } from "../src/compile/index.js";
import { DDIMScheduler, DiffusionPipeline, EulerDiscreteScheduler, type FluxPipeline, type StableDiffusionPipeline } from "../src/diffusers/index.js";
import { tensor } from "../src/tensor/index.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { maxAbsDiff, missing, readJson, SHARED } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

const SD = path.join(SHARED, "fixtures/diffusers/sd_tiny");
const FLUX = path.join(SHARED, "fixtures/diffusers/flux_tiny");

type Case = any;
const flat = (x: unknown): number[] => (x as unknown[]).flat(Infinity as 1) as number[];

async function sdImage(pipe: StableDiffusionPipeline, c: Case): Promise<Float32Array> {
  pipe.scheduler = c.scheduler_class === "DDIMScheduler" ? DDIMScheduler.fromConfig(c.scheduler_config) : EulerDiscreteScheduler.fromConfig(c.scheduler_config);
  const latents = tensor(flat(c.initial_latents), { shape: [1, 4, c.height / 2, c.width / 2], device: pipe.device });
  const out = await pipe.call({
    prompt: c.prompt, negativePrompt: c.negative_prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps,
    guidanceScale: c.guidance_scale, latents, outputType: "np",
  });
  return await (out.images as Tensor).data() as Float32Array;
}

async function fluxImage(pipe: FluxPipeline, c: Case): Promise<Float32Array> {
  const latents = tensor(new Float32Array(flat(c.initial_latents)), { shape: [1, c.image_seq_len, 64], device: pipe.device });
  const out = await pipe.call({
    prompt: c.prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps, guidanceScale: c.guidance_scale,
    maxSequenceLength: c.max_sequence_length, latents, outputType: "np",
  });
  return await (out.images as Tensor).data() as Float32Array;
}

/**
 * Eager images of `cases`, then compiled: `cases[0]` and `cases[1]` share a size (the first
 * compiles, the second replays), `cases[2]` is a second size (compiles once more).
 */
async function checkCompiled(pipe: DiffusionPipeline, cases: Case[], image: (c: Case) => Promise<Float32Array>, tol: { eager: number; ref: number }) {
  assert.equal(cases[0].height, cases[1].height);
  assert.equal(cases[0].width, cases[1].width);
  assert.notEqual(`${cases[2].height}x${cases[2].width}`, `${cases[0].height}x${cases[0].width}`);
  const eager: Float32Array[] = [];
  for (const c of cases) eager.push(await image(c));
  compiler.reset();
  await pipe.compile();
  assert.ok(pipe.isCompiled);
  const expectCalls = (c: Case) => c.num_inference_steps + 1; // denoiser per step + VAE decode
  const checkImage = (got: Float32Array, i: number) => {
    const c = cases[i];
    const de = maxAbsDiff(got, eager[i]);
    assert.ok(de <= tol.eager, `${c.name}: compiled image differs from eager by ${de} > ${tol.eager}`);
    const dr = maxAbsDiff(got, flat(c.image));
    assert.ok(dr <= tol.ref, `${c.name}: compiled image differs from diffusers' by ${dr} > ${tol.ref}`);
  };

  checkImage(await image(cases[0]), 0);
  let s = compiler.stats();
  assert.deepEqual(s.graphBreakReasons, [], "no graph breaks");
  assert.equal(s.compiles, 2, "the first image compiles the denoiser and the VAE decoder");
  assert.equal(s.cacheHits, expectCalls(cases[0]) - 2, "later steps of the first image replay the denoiser graph");
  const hits0 = s.cacheHits;

  checkImage(await image(cases[1]), 1);
  s = compiler.stats();
  assert.equal(s.compiles, 2, `a second image of the same size compiles nothing (${s.recompileReasons.join("; ")})`);
  assert.equal(s.cacheHits, hits0 + expectCalls(cases[1]), "every denoiser call and the decode of the second image replay");
  const hits1 = s.cacheHits;

  checkImage(await image(cases[2]), 2);
  s = compiler.stats();
  assert.equal(s.compiles, 4, "a second size compiles the denoiser and the decoder once more");
  assert.equal(s.cacheHits, hits1 + expectCalls(cases[2]) - 2);
  assert.equal(s.recompileReasons.length, 2);
  assert.ok(s.recompileReasons.every((r) => /shape/.test(r)), `recompiles name the changed shape: ${s.recompileReasons.join("; ")}`);
  assert.equal(s.graphBreaks, 0);
}

/** sd_tiny cases: two of one size (a DDIM and an Euler schedule) and one of another. */
function sdCases(): Case[] {
  const cases = readJson(path.join(SD, "expected.json")).cases as Case[];
  const pick = (name: string) => cases.find((c) => c.name === name) ?? assert.fail(`sd_tiny has no case ${name}`);
  return [pick("ddim_32x32_2steps"), pick("euler_32x32_2steps"), pick("ddim_32x48_2steps")];
}

function fluxCases(): Case[] {
  const cases = readJson(path.join(FLUX, "expected.json")).cases as Case[];
  const square = cases.filter((c) => c.height === c.width);
  const other = cases.find((c) => c.height !== c.width);
  assert.ok(square.length >= 2 && other, "flux_tiny has two square cases and a non-square one");
  return [square[0], square[1], other];
}

test("compile: StableDiffusionPipeline (sd_tiny) on cpu reuses its graphs per size; images equal eager (1e-5) and diffusers (1e-4)", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD, { device: "cpu", dtype: "float32" });
  await checkCompiled(pipe, sdCases(), (c) => sdImage(pipe, c), { eager: 1e-5, ref: 1e-4 });
});

test("compile: FluxPipeline (flux_tiny) on cpu reuses its graphs per size; images equal eager (1e-5) and diffusers (1e-4)", async (t) => {
  const skip = missing(FLUX);
  if (skip) return t.skip(skip);
  const pipe = await DiffusionPipeline.fromPretrained<FluxPipeline>(FLUX, { device: "cpu", dtype: "float32" });
  await checkCompiled(pipe, fluxCases(), (c) => fluxImage(pipe, c), { eager: 1e-5, ref: 1e-4 });
});

test("compile: StableDiffusionPipeline (sd_tiny) on webgpu reuses its graphs; images equal eager (1e-4) and diffusers (1e-3)", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD, { device: "cpu", dtype: "float32" });
  await pipe.to("webgpu");
  await checkCompiled(pipe, sdCases(), (c) => sdImage(pipe, c), { eager: 1e-4, ref: 1e-3 });
});
