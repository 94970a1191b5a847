/**
 * tsorch/diffusers' StableDiffusionPipeline against diffusers (../shared/fixtures/diffusers/sd_tiny,
 * made by tools/make_diffusers_fixtures.py): every case reproduced from its initial_latents — the
 * tokenizer checks exactly (tokenizer.json and the slow vocab.json + merges.txt), text embeddings
 * within 1e-4, every step's latents within rtol 1e-4 + atol 1e-4, the "np" image within 1e-4 on
 * cpu (every case within 1e-3 on webgpu), the "pil" PNG within one level; the scheduler schedules; loading from a
 * (mock) Hub id; a seed's reproducibility; and the clear errors for bad folders and inputs.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { PNG } from "pngjs";
import {
  FlowMatchEulerDiscreteScheduler, CLIPTextModel, DDIMScheduler, DiffusionPipeline, EulerDiscreteScheduler, PipelineImage, PreTrainedTokenizer, StableDiffusionPipeline,
  schedulerFromConfig, type SchedulerMixin,
} from "../src/diffusers/index.js";
import { openDevice } from "../src/devices/registry.js";
import { loadCheckpoint } from "../src/hub/index.js";
import { tensor } from "../src/tensor/index.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { CLI, maxAbsDiff, missing, readJson, ROOT, SHARED } from "./helpers/shared.js";
import { startMockHub, writeSafetensors } from "./helpers/mock_hub.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { tempDir } from "./helpers/temp_dir.js";

const SD = path.join(SHARED, "fixtures/diffusers/sd_tiny");
const run = promisify(execFile);

interface SDCase {
  name: string; scheduler_class: string; scheduler_config: Record<string, unknown>; prompt: string; negative_prompt: string;
  guidance_scale: number; height: number; width: number; num_inference_steps: number; input_ids: number[]; negative_input_ids: number[];
  prompt_embeds: number[][][]; negative_prompt_embeds: number[][][]; initial_latents: number[][][][]; init_noise_sigma: number;
  timesteps: number[]; sigmas: number[] | null; alphas_cumprod_t?: number[]; alphas_cumprod_prev?: number[];
  steps: { t: number; latents: number[][][][] }[]; image: number[][][][]; image_png: string;
}

const flat = (x: unknown): number[] => (x as unknown[]).flat(Infinity as 1) as number[];

/** Largest violation of |a − b| <= atol + rtol·|b| (<= 0 when within). */
function excess(a: ArrayLike<number>, b: number[], rtol: number, atol: number): number {
  assert.equal(a.length, b.length);
  let worst = -Infinity;
  for (let i = 0; i < b.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) - atol - rtol * Math.abs(b[i]));
  return worst;
}

function schedulerFor(c: SDCase): SchedulerMixin {
  return c.scheduler_class === "DDIMScheduler" ? DDIMScheduler.fromConfig(c.scheduler_config) : EulerDiscreteScheduler.fromConfig(c.scheduler_config);
}

/** Run case `c` on `pipe` from its initial latents; check every step and the image within `tol`. */
async function checkCase(pipe: StableDiffusionPipeline, c: SDCase, tol: { rtol: number; atol: number; image: number }): Promise<void> {
  pipe.scheduler = schedulerFor(c);
  const latents = tensor(flat(c.initial_latents), { shape: [1, 4, c.height / 2, c.width / 2], device: pipe.device });
  const seen: number[] = [];
  const out = await pipe.call({
    prompt: c.prompt, negativePrompt: c.negative_prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps,
    guidanceScale: c.guidance_scale, latents, outputType: "np",
    callbackOnStepEnd: async (i, t, x) => {
      seen.push(t);
      assert.equal(t, c.steps[i].t, `${c.name}: timestep of step ${i}`);
      const e = excess(await x.data() as Float32Array, flat(c.steps[i].latents), tol.rtol, tol.atol);
      assert.ok(e <= 0, `${c.name}: step ${i} latents exceed rtol ${tol.rtol} + atol ${tol.atol} by ${e}`);
    },
  });
  assert.equal(seen.length, c.num_inference_steps);
  const image = out.images as Tensor;
  assert.deepEqual(image.shape, [1, c.height, c.width, 3]);
  const d = maxAbsDiff(await image.data() as Float32Array, flat(c.image));
  assert.ok(d <= tol.image, `${c.name}: image max diff ${d} > ${tol.image}`);
}

test("sd_tiny tokenizer: every tokenizer check exact, from tokenizer.json and from the slow vocab.json + merges.txt", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const checks = readJson(path.join(SD, "expected.json")).tokenizer_checks.tokenizer as { text: string; input_ids: number[]; tokens: string[] }[];
  const slow = tempDir("tsorch-clip-slow-");
  try {
    for (const f of ["vocab.json", "merges.txt", "tokenizer_config.json"]) copyFileSync(path.join(SD, "tokenizer", f), path.join(slow, f));
    for (const dir of [path.join(SD, "tokenizer"), slow]) {
      const tok = await PreTrainedTokenizer.fromPretrained(dir);
      for (const c of checks) assert.deepEqual(tok.encode(c.text), c.input_ids, `${dir}: ${JSON.stringify(c.text)}`);
    }
  } finally {
    rmSync(slow, { recursive: true, force: true });
  }
});

test("sd_tiny: padded ids and CLIP text embeddings (prompt and negative) within 1e-4", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const cases = readJson(path.join(SD, "expected.json")).cases as SDCase[];
  const pipe = await StableDiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD);
  const c = cases[0];
  assert.deepEqual(pipe.tokenize([c.prompt, c.negative_prompt]), [c.input_ids, c.negative_input_ids]);
  const embeds = pipe.encodePrompt([c.prompt, c.negative_prompt]);
  const d = maxAbsDiff(await embeds.data() as Float32Array, [...flat(c.prompt_embeds), ...flat(c.negative_prompt_embeds)]);
  assert.ok(d <= 1e-4, `embeddings max diff ${d}`);
});

test("CLIPTextModel pooled output (flux_tiny's CLIP, gelu, eos_token_id 999: the first eos) within 1e-4; eos_token_id 2 pools at argmax(ids), an absent eos id at 0", async (t) => {
  const FLUX = path.join(SHARED, "fixtures/diffusers/flux_tiny");
  const skip = missing(FLUX);
  if (skip) return t.skip(skip);
  const c = readJson(path.join(FLUX, "expected.json")).cases[0] as { clip_input_ids: number[]; pooled_prompt_embeds: number[][] };
  const dir = path.join(FLUX, "text_encoder");
  const config = readJson(path.join(dir, "config.json"));
  const model = new CLIPTextModel(config);
  model.loadWeights(await loadCheckpoint(dir), await openDevice("cpu"));
  const { lastHiddenState, poolerOutput } = model.forward([c.clip_input_ids]);
  const d = maxAbsDiff(await poolerOutput.data() as Float32Array, flat(c.pooled_prompt_embeds));
  assert.ok(d <= 1e-4, `pooled max diff ${d}`);
  // Legacy configs (eos_token_id 2) pool at argmax(ids): here the first 999 too, so the same row.
  const legacy = new CLIPTextModel({ ...config, eos_token_id: 2 });
  legacy.loadWeights(await loadCheckpoint(dir), await openDevice("cpu"));
  const dl = maxAbsDiff(await legacy.forward([c.clip_input_ids]).poolerOutput.data() as Float32Array, flat(c.pooled_prompt_embeds));
  assert.ok(dl <= 1e-4, `legacy pooled max diff ${dl}`);
  // An eos id that does not occur pools at position 0 (argmax of all false), as transformers.
  const absent = new CLIPTextModel({ ...config, eos_token_id: 5 });
  absent.loadWeights(await loadCheckpoint(dir), await openDevice("cpu"));
  const out = absent.forward([c.clip_input_ids]);
  assert.deepEqual(await out.poolerOutput.data(), await out.lastHiddenState.select(0, 0).narrow(0, 0, 1).data());
  assert.ok(maxAbsDiff(await lastHiddenState.select(0, 0).narrow(0, 0, 1).data() as Float32Array, Array.from(await out.poolerOutput.data() as Float32Array)) < 1e-6);
});

test("sd_tiny schedulers: timesteps, sigmas, init_noise_sigma and ᾱ as diffusers", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  for (const c of readJson(path.join(SD, "expected.json")).cases as SDCase[]) {
    const s = schedulerFor(c);
    s.setTimesteps(c.num_inference_steps);
    assert.deepEqual(s.timesteps, c.timesteps, c.name);
    assert.ok(Math.abs(s.initNoiseSigma - c.init_noise_sigma) < 1e-5, `${c.name}: init_noise_sigma ${s.initNoiseSigma}`);
    if (s instanceof EulerDiscreteScheduler) assert.ok(maxAbsDiff(s.sigmas, c.sigmas!) < 1e-5, `${c.name}: sigmas ${s.sigmas}`);
    if (s instanceof DDIMScheduler) {
      const step = 1000 / c.num_inference_steps;
      assert.ok(maxAbsDiff(c.timesteps.map((x) => s.alphaAt(x)), c.alphas_cumprod_t!) < 1e-6, `${c.name}: ᾱ_t`);
      assert.ok(maxAbsDiff(c.timesteps.map((x) => s.alphaAt(x - step)), c.alphas_cumprod_prev!) < 1e-6, `${c.name}: ᾱ_prev`);
    }
    assert.equal(s.config._class_name, c.scheduler_class);
  }
});

test("sd_tiny on cpu: every case's step latents (rtol 1e-4 + atol 1e-4) and np image (1e-4) match diffusers", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD, { device: "cpu", dtype: "float32" });
  assert.ok(pipe instanceof StableDiffusionPipeline);
  for (const c of readJson(path.join(SD, "expected.json")).cases as SDCase[]) await checkCase(pipe, c, { rtol: 1e-4, atol: 1e-4, image: 1e-4 });
});

test("sd_tiny with float16 and bfloat16 weights: weights stay half precision, images within 2e-2 of diffusers' float32", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const c = (readJson(path.join(SD, "expected.json")).cases as SDCase[])[0];
  for (const dtype of ["float16", "bfloat16"] as const) {
    const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD, { dtype });
    assert.equal(pipe.unet.conv_in.weight.value.dtype, dtype);
    assert.equal(pipe.vae.decoder.conv_out.weight.value.dtype, dtype);
    pipe.scheduler = schedulerFor(c);
    const latents = tensor(flat(c.initial_latents), { shape: [1, 4, c.height / 2, c.width / 2] });
    const out = await pipe.call({ prompt: c.prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps, latents, outputType: "np" });
    const d = maxAbsDiff(await (out.images as Tensor).data() as Float32Array, flat(c.image));
    assert.ok(d < 2e-2, `${dtype}: image max diff ${d}`);
  }
});

test("sd_tiny AutoencoderKL.encode: the latent distribution's mean and logvar within 1e-4 of diffusers (test/data/diffusers_vae_encode.py)", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const ref = JSON.parse(readFileSync(path.join(ROOT, "test/data/diffusers_vae_encode.json"), "utf8")) as { shape: number[]; mean: unknown; logvar: unknown };
  const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD);
  const [, C, H, W] = ref.shape;
  const x = Float32Array.from({ length: C * H * W }, (_, i) => Math.sin(0.3 * Math.floor((i % (H * W)) / W) + 0.7 * (i % W) + 1.1 * Math.floor(i / (H * W))));
  const { mean, logvar } = pipe.vae.encode(tensor(x, { shape: ref.shape }));
  assert.deepEqual(mean.shape, [1, 4, H / 2, W / 2]);
  const dm = maxAbsDiff(await mean.data() as Float32Array, flat(ref.mean)), dl = maxAbsDiff(await logvar.data() as Float32Array, flat(ref.logvar));
  assert.ok(dm <= 1e-4 && dl <= 1e-4, `mean max diff ${dm}, logvar max diff ${dl}`);
});

test("sd_tiny pil output: the saved PNG is within one level of diffusers' PNG", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const c = (readJson(path.join(SD, "expected.json")).cases as SDCase[])[1];
  const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD);
  pipe.scheduler = schedulerFor(c);
  const latents = tensor(flat(c.initial_latents), { shape: [1, 4, c.height / 2, c.width / 2] });
  const out = await pipe.call({ prompt: c.prompt, negativePrompt: "", height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps, latents });
  const img = (out.images as PipelineImage[])[0];
  const dir = tempDir("tsorch-sd-png-");
  try {
    const file = path.join(dir, "out.png");
    await img.save(file);
    assertPngClose(file, path.join(SD, c.image_png));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Every channel of every pixel of PNG `a` within one level of PNG `b` (same size). */
function assertPngClose(a: string, b: string): void {
  const x = PNG.sync.read(readFileSync(a)), y = PNG.sync.read(readFileSync(b));
  assert.deepEqual([x.width, x.height], [y.width, y.height]);
  let worst = 0;
  for (let i = 0; i < x.data.length; i++) worst = Math.max(worst, Math.abs(x.data[i] - y.data[i]));
  assert.ok(worst <= 1, `PNG pixels differ by up to ${worst} levels`);
}

test("sd_tiny: the same seed gives the same latents, another seed others", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD);
  const gen = async (seed: number) => await ((await pipe.call({ prompt: "a cat", height: 32, width: 32, numInferenceSteps: 1, seed, outputType: "latent" })).images as Tensor).data() as Float32Array;
  const a = await gen(7), b = await gen(7), c = await gen(8);
  assert.deepEqual(a, b);
  assert.ok(maxAbsDiff(a, c) > 0.1);
});

test("sd_tiny from a Hub id (mock Hub): downloads the components into the cache and loads them", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const hub = await startMockHub({ "org/sd-tiny": { branches: { main: SD } } });
  const cacheDir = tempDir("tsorch-sd-cache-");
  try {
    const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>("org/sd-tiny", { endpoint: hub.url, cacheDir, progress: false });
    assert.ok(pipe instanceof StableDiffusionPipeline);
    assert.ok(!hub.requests.some((r) => r.url.endsWith(".png") || r.url.endsWith("expected.json")), "fetched files loading does not need");
    const c = (readJson(path.join(SD, "expected.json")).cases as SDCase[])[0];
    assert.deepEqual(pipe.tokenize([c.prompt]), [c.input_ids]);
  } finally {
    await hub.close();
    rmSync(cacheDir, { recursive: true, force: true });
  }
});

test("diffusers errors: missing component folder or weights, unsupported pipeline class, unknown scheduler, bad height/width", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const dir = tempDir("tsorch-sd-bad-");
  const index = readJson(path.join(SD, "model_index.json"));
  const layout = (edit: (i: Record<string, unknown>) => void, omit: string[] = []) => {
    rmSync(dir, { recursive: true, force: true });
    cpSync(SD, dir, { recursive: true, filter: (src) => !omit.some((o) => src === path.join(SD, o)) && !src.endsWith(".png") && !src.endsWith("expected.json") });
    const i = structuredClone(index);
    edit(i);
    writeFileSync(path.join(dir, "model_index.json"), JSON.stringify(i));
  };
  try {
    layout(() => {}, ["vae"]);
    await assert.rejects(DiffusionPipeline.fromPretrained(dir), /component 'vae' \(AutoencoderKL\) is listed in .*model_index.json but its folder .*vae is missing/);
    layout(() => {}, ["unet/diffusion_pytorch_model.safetensors"]);
    await assert.rejects(DiffusionPipeline.fromPretrained(dir), /component 'unet': no weights in .*unet \(looked for diffusion_pytorch_model.safetensors/);
    layout((i) => { i._class_name = "StableVideoDiffusionPipeline"; });
    await assert.rejects(DiffusionPipeline.fromPretrained(dir), /unsupported pipeline class "StableVideoDiffusionPipeline" in .*; supported: StableDiffusionPipeline/);
    layout(() => {});
    writeFileSync(path.join(dir, "scheduler/scheduler_config.json"), JSON.stringify({ _class_name: "LCMScheduler" }));
    await assert.rejects(DiffusionPipeline.fromPretrained(dir), /unsupported scheduler LCMScheduler; supported: DDIMScheduler, EulerDiscreteScheduler/);
    assert.throws(() => schedulerFromConfig({ _class_name: "PNDMScheduler" }), /unsupported scheduler PNDMScheduler; supported: .*DDIMScheduler/);
    assert.throws(() => new EulerDiscreteScheduler({ use_karras_sigmas: true }), /use_karras_sigmas=true is not supported/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD);
  await assert.rejects(pipe.call({ prompt: "x", height: 30, width: 32, numInferenceSteps: 1 }), /height must be a positive multiple of 8, got 30/);
  await assert.rejects(pipe.call({ prompt: "x", height: 32, width: 0, numInferenceSteps: 1 }), /width must be a positive multiple of 8, got 0/);
  await assert.rejects(pipe.call({ prompt: "x", height: 32, width: 32, numInferenceSteps: 1, latents: tensor(new Float32Array(16), { shape: [1, 4, 2, 2] }) }),
    /latents must have shape \[1,4,16,16\], got \[1,4,2,2\]/);
  await assert.rejects(pipe.call({ prompt: "x", numInferenceSteps: 0 }), /numInferenceSteps must be an integer in \[1, 1000\]/);
  // Nothing a call would silently ignore: unknown options (naming the closest), outputTypes, a flow-matching scheduler.
  await assert.rejects(DiffusionPipeline.fromPretrained(SD, { dtyp: "float16" } as never), /DiffusionPipeline.fromPretrained: unknown option 'dtyp'; did you mean 'dtype'\?/);
  await assert.rejects(pipe.call({ prompt: "x", num_inference_steps: 1 } as never), /StableDiffusionPipeline: unknown option 'num_inference_steps'; did you mean 'numInferenceSteps'\?/);
  await assert.rejects(pipe.call({ prompt: "x", maxSequenceLength: 32 } as never), /StableDiffusionPipeline: unknown option 'maxSequenceLength'/);
  await assert.rejects(pipe.call({ prompt: "x", outputType: "pill" } as never), /outputType must be one of pil, np, latent, got "pill"/);
  pipe.scheduler = FlowMatchEulerDiscreteScheduler.fromConfig({});
  await assert.rejects(pipe.call({ prompt: "x", numInferenceSteps: 1 }), /StableDiffusionPipeline needs a noise-prediction scheduler .*, got FlowMatchEulerDiscreteScheduler/);
});

test("tsorch diffuse: the PNG from a case's latents is within one level of diffusers' PNG; bad flags are usage errors", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  const c = (readJson(path.join(SD, "expected.json")).cases as SDCase[]).find((x) => x.name === "euler_32x48_2steps")!;
  const dir = tempDir("tsorch-diffuse-");
  try {
    const latents = path.join(dir, "latents.safetensors");
    writeSafetensors(latents, [{ name: "latents", dtype: "F32", shape: [1, 4, c.height / 2, c.width / 2], bytes: new Uint8Array(Float32Array.from(flat(c.initial_latents)).buffer) }]);
    const out = path.join(dir, "out.png");
    const { stdout } = await run(process.execPath, [CLI, "diffuse", "--model", SD, "--prompt", c.prompt, "--negative-prompt", "", "--height", String(c.height),
      "--width", String(c.width), "--steps", String(c.num_inference_steps), "--guidance-scale", "7.5", "--scheduler", "euler", "--latents", latents, "--output", out]);
    assert.equal(stdout.trim(), out);
    assertPngClose(out, path.join(SD, c.image_png));
    await assert.rejects(run(process.execPath, [CLI, "diffuse", "--model", SD, "--prompt", "x", "--scheduler", "pndm", "--output", out]),
      (e: { code: number; stderr: string }) => e.code === 2 && /--scheduler must be one of ddim, euler, flow-match-euler, got 'pndm'/.test(e.stderr));
    await assert.rejects(run(process.execPath, [CLI, "diffuse", "--model", SD, "--prompt", "x", "--output", path.join(dir, "no-such-folder", "x.png")]),
      (e: { code: number; stderr: string }) => e.code === 2 && /--output: no such folder: .*no-such-folder/.test(e.stderr));
    await assert.rejects(run(process.execPath, [CLI, "diffuse", "--model", SD, "--prompt", "x", "--height", "20", "--output", out]),
      (e: { code: number; stderr: string }) => e.code === 1 && /height must be a positive multiple of 8, got 20/.test(e.stderr));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
test("sd_tiny on webgpu: pipe.to('webgpu'), every case within 1e-3", async (t) => {
  const skip = missing(SD);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const pipe = await DiffusionPipeline.fromPretrained<StableDiffusionPipeline>(SD);
  await pipe.to("webgpu");
  assert.equal(pipe.device.name, "webgpu");
  const cases = readJson(path.join(SD, "expected.json")).cases as SDCase[];
  assert.equal(cases.length, 6);
  for (const c of cases) await checkCase(pipe, c, { rtol: 1e-3, atol: 1e-3, image: 1e-3 });
});
