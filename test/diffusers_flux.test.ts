/**
 * FLUX against diffusers' outputs on ../shared/fixtures/diffusers/flux_tiny (expected.json, see its
 * README): the T5 tokenizer (Precompiled normalizer) exactly, T5EncoderModel's prompt embeddings,
 * FlowMatchEulerDiscreteScheduler schedules (fixture cases and test/data/flow_match_schedules.json
 * from diffusers), FluxTransformer2DModel's output at every step, and FluxPipeline end to end
 * (ids, embeddings, every step's latents through callbackOnStepEnd, the image) from each case's
 * initial_latents, on cpu (1e-4) and webgpu (1e-3).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { PNG } from "pngjs";
import { test } from "node:test";
import { openDevice } from "../src/devices/registry.js";
import type { Device } from "../src/devices/device.js";
import { readSafetensors } from "../src/hub/index.js";
import { tensor } from "../src/tensor/creation.js";
import { cat } from "../src/tensor/ops.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { PreTrainedTokenizer } from "../src/transformers/index.js";
import { T5EncoderModel } from "../src/transformers/models/t5_encoder.js";
import { FluxTransformer2DModel } from "../src/diffusers/models/transformer_flux.js";
import { DiffusionPipeline, EulerDiscreteScheduler, FluxPipeline, latentImageIds, packLatents, PipelineImage, unpackLatents } from "../src/diffusers/index.js";
import { calculateShift, FlowMatchEulerDiscreteScheduler } from "../src/diffusers/schedulers/scheduling_flow_match_euler_discrete.js";
import { CLI, maxAbsDiff, missing, readJson, ROOT, SHARED } from "./helpers/shared.js";
import { writeSafetensors } from "./helpers/mock_hub.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { tempDir } from "./helpers/temp_dir.js";

const FLUX = path.join(SHARED, "fixtures/diffusers/flux_tiny");
const EXPECTED = path.join(FLUX, "expected.json");

/* eslint-disable @typescript-eslint/no-explicit-any */
type Case = any;

/** A float32 tensor of nested reference values with `shape`. */
function ref(values: unknown, shape: number[], device: Device): Tensor {
  return tensor(new Float32Array((values as number[]).flat(Infinity as 1) as number[]), { shape, dtype: "float32", device });
}

async function closeTo(actual: Tensor, expected: unknown, atol: number, rtol: number, what: string): Promise<number> {
  const a = (await actual.data()) as Float32Array;
  const e = (expected as number[]).flat(Infinity as 1) as number[];
  assert.equal(a.length, e.length, `${what}: ${a.length} values, expected ${e.length}`);
  let worst = 0;
  for (let i = 0; i < e.length; i++) {
    const excess = Math.abs(a[i] - e[i]) - (atol + rtol * Math.abs(e[i]));
    if (excess > 0) assert.fail(`${what}: index ${i} is ${a[i]}, expected ${e[i]} (atol ${atol}, rtol ${rtol})`);
    worst = Math.max(worst, Math.abs(a[i] - e[i]));
  }
  return worst;
}

test("flux_tiny CLIP tokenizer: every tokenizer_checks entry exactly", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const e = readJson(EXPECTED);
  const tok = await PreTrainedTokenizer.fromPretrained(path.join(FLUX, "tokenizer"));
  for (const c of e.tokenizer_checks.tokenizer) assert.deepEqual(tok.encode(c.text), c.input_ids, `CLIP ids of ${JSON.stringify(c.text)}`);
});

test("flux_tiny T5 tokenizer (Unigram, Precompiled nmt_nfkc normalizer): every tokenizer_checks entry exactly", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const e = readJson(EXPECTED);
  const tok = await PreTrainedTokenizer.fromPretrained(path.join(FLUX, "tokenizer_2"));
  assert.ok(e.tokenizer_checks.tokenizer_2.length >= 9);
  for (const c of e.tokenizer_checks.tokenizer_2) assert.deepEqual(tok.encode(c.text), c.input_ids, `T5 ids of ${JSON.stringify(c.text)}`);
});

test("T5 Precompiled normalizer runs the nmt_nfkc charsmap as the Rust crate (ZWJ, emoji sequences, halfwidth kana, stacked marks, long clusters): normalized text and ids", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const d = readJson(path.join(ROOT, "test/data/t5_precompiled.json"));
  const tok = await PreTrainedTokenizer.fromPretrained(path.join(FLUX, "tokenizer_2"));
  const normalizer = (tok as unknown as { tokenizer: { normalizer: { normalize(s: string): string } } }).tokenizer.normalizer;
  for (const c of d.cases) {
    assert.equal(normalizer.normalize(c.text), c.normalized, `normalized ${JSON.stringify(c.text)}`);
    assert.deepEqual(tok.encode(c.text), c.ids, `ids of ${JSON.stringify(c.text)}`);
  }
});

for (const dev of ["cpu", "webgpu"]) {
  test(`flux_tiny T5EncoderModel on ${dev}: prompt_embeds of every case within ${dev === "cpu" ? "1e-4" : "1e-3"}`, async (t) => {
    const skip = missing(EXPECTED);
    if (skip) return t.skip(skip);
    const device = dev === "cpu" ? await openDevice("cpu") : await webgpuOrSkip(t);
    if (!device) return;
    const e = readJson(EXPECTED);
    const model = new T5EncoderModel(readJson(path.join(FLUX, "text_encoder_2/config.json")));
    model.loadWeights(readSafetensors(path.join(FLUX, "text_encoder_2/model.safetensors")), device);
    for (const c of e.cases as Case[]) {
      const out = model.encode(model.idsTensor([c.t5_input_ids]));
      assert.deepEqual(out.shape, [1, 32, 32]);
      await closeTo(out, c.prompt_embeds, dev === "cpu" ? 1e-4 : 1e-3, 0, `${c.name} prompt_embeds`);
    }
  });
}

test("FlowMatchEulerDiscreteScheduler: mu, sigmas and timesteps of every flux_tiny case (dynamic exponential shift)", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const e = readJson(EXPECTED);
  for (const c of e.cases as Case[]) {
    const mu = calculateShift(c.image_seq_len, c.scheduler_config.base_image_seq_len, c.scheduler_config.max_image_seq_len,
      c.scheduler_config.base_shift, c.scheduler_config.max_shift);
    assert.ok(Math.abs(mu - c.mu) < 1e-6, `${c.name} mu ${mu}`);
    const s = FlowMatchEulerDiscreteScheduler.fromConfig(c.scheduler_config);
    s.setTimesteps(c.num_inference_steps, { sigmas: c.sigmas_requested, mu });
    assert.ok(maxAbsDiff(s.sigmas, c.sigmas) < 1e-6, `${c.name} sigmas ${s.sigmas}`);
    assert.ok(maxAbsDiff(s.timesteps, c.timesteps) < 1e-4, `${c.name} timesteps ${s.timesteps}`);
  }
});

test("FlowMatchEulerDiscreteScheduler: schedules equal diffusers' bit for bit (static/dynamic/linear shift, custom sigmas and timesteps, shift_terminal, karras, exponential, invert_sigmas)", () => {
  const d = readJson(path.join(ROOT, "test/data/flow_match_schedules.json"));
  for (const c of d.cases) {
    const s = new FlowMatchEulerDiscreteScheduler(c.config);
    const k = c.set_timesteps;
    s.setTimesteps(k.num_inference_steps, { sigmas: k.sigmas, timesteps: k.timesteps, mu: k.mu });
    assert.deepEqual(s.timesteps, c.timesteps, `${c.name} timesteps`);
    assert.deepEqual(s.sigmas, c.sigmas, `${c.name} sigmas`);
  }
});

test("FlowMatchEulerDiscreteScheduler: bad configs and calls are refused naming the problem", () => {
  assert.throws(() => new FlowMatchEulerDiscreteScheduler({ use_karras_sigmas: true, use_exponential_sigmas: true }), /only one of use_beta_sigmas/);
  assert.throws(() => new FlowMatchEulerDiscreteScheduler({ time_shift_type: "cubic" }), /time_shift_type/);
  assert.throws(() => new FlowMatchEulerDiscreteScheduler({ shift: "3" }), /'shift' must be a number/);
  assert.throws(() => new FlowMatchEulerDiscreteScheduler({ use_beta_sigmas: true }), /use_beta_sigmas/);
  assert.throws(() => new FlowMatchEulerDiscreteScheduler({ stochastic_sampling: true }), /stochastic_sampling/);
  const s = new FlowMatchEulerDiscreteScheduler({ use_dynamic_shifting: true });
  assert.throws(() => s.setTimesteps(4), /mu must be passed/);
  assert.throws(() => s.setTimesteps(3, { sigmas: [1, 0.5], mu: 0.5 }), /2 entries but numInferenceSteps is 3/);
  assert.throws(() => s.indexForTimestep(12.5), /not in the schedule/);
});

// On webgpu the transformer is covered by the pipeline test below (every step's latents).
for (const dev of ["cpu"]) {
  test(`flux_tiny FluxTransformer2DModel on ${dev}: model_output of every step of every case from that step's inputs`, async (t) => {
    const skip = missing(EXPECTED);
    if (skip) return t.skip(skip);
    const device = await openDevice(dev);
    const e = readJson(EXPECTED);
    const model = new FluxTransformer2DModel(readJson(path.join(FLUX, "transformer/config.json")));
    model.loadWeights(readSafetensors(path.join(FLUX, "transformer/diffusion_pytorch_model.safetensors")), device);
    const tol = 1e-4;
    for (const c of e.cases as Case[]) {
      const s = FlowMatchEulerDiscreteScheduler.fromConfig(c.scheduler_config);
      s.setTimesteps(c.num_inference_steps, { sigmas: c.sigmas_requested, mu: calculateShift(c.image_seq_len) });
      const N = c.image_seq_len;
      let latents = c.initial_latents;
      for (const step of c.steps) {
        // The scheduler's exact timestep: expected.json's timestep_input is rounded to 6 decimals.
        const out = model.forward({
          hiddenStates: ref(latents, [1, N, 64], device), encoderHiddenStates: ref(c.prompt_embeds, [1, 32, 32], device),
          pooledProjections: ref(c.pooled_prompt_embeds, [1, 32], device), timestep: Math.fround(s.timesteps[step.i] / 1000),
          guidance: c.guidance, imgIds: c.latent_image_ids, txtIds: c.text_ids,
        });
        await closeTo(out, step.model_output, tol, tol, `${c.name} step ${step.i} model_output`);
        latents = step.latents;
      }
    }
  });
}

test("FluxTransformer2DModel without guidance_embeds (FLUX.1-schnell layout), batch of 2: output equals diffusers' (test/data/flux_no_guidance.py)", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const device = await openDevice("cpu");
  const d = readJson(path.join(ROOT, "test/data/flux_no_guidance.json"));
  const c = (readJson(EXPECTED).cases as Case[]).find((x) => x.name === d.case);
  const model = new FluxTransformer2DModel({ ...readJson(path.join(FLUX, "transformer/config.json")), guidance_embeds: false });
  const weights = readSafetensors(path.join(FLUX, "transformer/diffusion_pytorch_model.safetensors"));
  for (const k of [...weights.keys()]) if (k.includes("guidance_embedder")) weights.delete(k);
  model.loadWeights(weights, device);
  const x = ref(c.initial_latents, [1, 64, 64], device), txt = ref(c.prompt_embeds, [1, 32, 32], device), pooled = ref(c.pooled_prompt_embeds, [1, 32], device);
  const out = model.forward({
    hiddenStates: cat([x, x.neg()], 0), encoderHiddenStates: cat([txt, txt.mul(0.5)], 0), pooledProjections: cat([pooled, pooled.mul(0.5)], 0),
    timestep: d.timestep, imgIds: c.latent_image_ids, txtIds: c.text_ids,
  });
  await closeTo(out, d.output, 1e-4, 1e-4, "no-guidance batch output");
  assert.throws(() => new FluxTransformer2DModel({ ...readJson(path.join(FLUX, "transformer/config.json")), axes_dims_rope: [4, 4, 4] }), /axes_dims_rope \[4,4,4\] must sum to attention_head_dim 16/);
});

/** Run `c` through `pipe` from its initial_latents; checks every step's latents and returns the output. */
async function runCase(pipe: FluxPipeline, c: Case, tol: number, outputType: "np" | "latent") {
  const seen: number[] = [];
  const latents = ref(c.initial_latents, [1, c.image_seq_len, 64], pipe.device);
  const out = await pipe.call({
    prompt: c.prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps, guidanceScale: c.guidance_scale,
    maxSequenceLength: c.max_sequence_length, latents, outputType,
    callbackOnStepEnd: async (i, t, l) => {
      assert.ok(Math.abs(t - c.timesteps[i]) < 1e-4, `${c.name} step ${i} timestep ${t}`);
      await closeTo(l, c.steps[i].latents, tol, tol, `${c.name} step ${i} latents`);
      seen.push(i);
    },
  });
  assert.deepEqual(seen, c.steps.map((s: Case) => s.i));
  return out.images as Tensor;
}

test("flux_tiny FluxPipeline on cpu: ids, pooled CLIP and T5 embeddings (1e-4), every step's latents (rtol 1e-4 + atol 1e-4), image (1e-4) of every case", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const e = readJson(EXPECTED);
  const pipe = await DiffusionPipeline.fromPretrained<FluxPipeline>(FLUX, { device: "cpu", dtype: "float32" });
  assert.ok(pipe instanceof FluxPipeline, `model_index.json _class_name FluxPipeline builds ${pipe.constructor.name}`);
  for (const c of e.cases as Case[]) {
    assert.deepEqual(pipe.clipIds([c.prompt])[0], c.clip_input_ids);
    assert.deepEqual(pipe.t5Ids([c.prompt], c.max_sequence_length)[0], c.t5_input_ids);
    const { promptEmbeds, pooledPromptEmbeds } = pipe.encodePrompt([c.prompt], [c.prompt], c.max_sequence_length);
    await closeTo(pooledPromptEmbeds, c.pooled_prompt_embeds, 1e-4, 0, `${c.name} pooled_prompt_embeds`);
    await closeTo(promptEmbeds, c.prompt_embeds, 1e-4, 0, `${c.name} prompt_embeds`);
    const image = await runCase(pipe, c, 1e-4, "np");
    assert.deepEqual(image.shape, [1, c.height, c.width, 3]);
    await closeTo(image, c.image, 1e-4, 0, `${c.name} image`);
  }
});

test("flux_tiny FluxPipeline moved to webgpu: every step's latents and the image of every case within 1e-3", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const e = readJson(EXPECTED);
  const pipe = await FluxPipeline.fromPretrained<FluxPipeline>(FLUX);
  await pipe.to("webgpu");
  assert.equal(pipe.device.name, "webgpu");
  for (const c of e.cases as Case[]) {
    const image = await runCase(pipe, c, 1e-3, "np");
    assert.equal(image.device.name, "webgpu");
    await closeTo(image, c.image, 1e-3, 0, `${c.name} image on webgpu`);
  }
});

test("flux_tiny FluxPipeline with float16 / bfloat16 weights on cpu: weights stay half, the image within the weights' rounding of diffusers' float32 one", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const c = (readJson(EXPECTED).cases as Case[])[1];
  // Measured: 9.7e-4 (float16, 11-bit mantissa) and 5.7e-3 (bfloat16, 8-bit) on this case.
  for (const [dtype, tol] of [["float16", 3e-3], ["bfloat16", 2e-2]] as const) {
    const pipe = await DiffusionPipeline.fromPretrained<FluxPipeline>(FLUX, { dtype });
    for (const m of [pipe.transformer, pipe.textEncoder2, pipe.vae]) assert.equal(m.stateDict().values().next().value!.dtype, dtype);
    const image = await runCase(pipe, c, Infinity, "np");
    await closeTo(image, c.image, tol, 0, `${c.name} image with ${dtype} weights`);
  }
});

test("FluxPipeline: unpacked latents [B, C, h, w] (the randn draw) are packed as diffusers' _pack_latents", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const c = (readJson(EXPECTED).cases as Case[])[2];
  const pipe = await FluxPipeline.fromPretrained<FluxPipeline>(FLUX);
  const unpacked = ref(c.initial_latents_unpacked, [1, 16, c.latent_height, c.latent_width], pipe.device);
  assert.deepEqual(await packLatents(unpacked).data(), await ref(c.initial_latents, [1, c.image_seq_len, 64], pipe.device).data());
  assert.deepEqual(await unpackLatents(packLatents(unpacked), c.latent_height, c.latent_width).data(), await unpacked.data());
  assert.deepEqual(latentImageIds(c.latent_height / 2, c.latent_width / 2), c.latent_image_ids);
  const out = await pipe.call({ prompt: c.prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps,
    maxSequenceLength: c.max_sequence_length, latents: unpacked, outputType: "latent" });
  await closeTo(out.images as Tensor, c.steps[c.steps.length - 1].latents, 1e-4, 1e-4, "final latents from unpacked initial latents");
});

test("FluxPipeline: a seed gives the same image twice; pil output is 8-bit RGB", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const pipe = await FluxPipeline.fromPretrained<FluxPipeline>(FLUX);
  const opts = { prompt: "a squirrel", height: 32, width: 48, numInferenceSteps: 1, maxSequenceLength: 16, seed: 7 };
  const [a, b] = [await pipe.call(opts), await pipe.call(opts)].map((o) => o.images as PipelineImage[]);
  assert.equal(a.length, 1);
  assert.ok(a[0] instanceof PipelineImage);
  assert.equal(a[0].width, 48);
  assert.equal(a[0].height, 32);
  assert.deepEqual(a[0].data, b[0].data);
  const other = (await pipe.call({ ...opts, seed: 8 })).images as PipelineImage[];
  assert.notDeepEqual(other[0].data, a[0].data);
});

test("FluxPipeline: bad sizes, latents, sequence lengths and schedulers are refused naming the problem", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const pipe = await FluxPipeline.fromPretrained<FluxPipeline>(FLUX);
  const base = { prompt: "a cat", numInferenceSteps: 1, maxSequenceLength: 8, outputType: "latent" as const };
  await assert.rejects(pipe.call({ ...base, height: 30, width: 32 }), /height must be a positive multiple of 4 \(VAE scale factor 2 x 2x2 latent packing\), got 30/);
  await assert.rejects(pipe.call({ ...base, height: 32, width: 34 }), /width must be a positive multiple of 4/);
  await assert.rejects(pipe.call({ ...base, height: 32, width: 32, latents: ref(new Array(16 * 8 * 8).fill(0), [1, 16, 8, 8], pipe.device) }),
    /latents must be packed \[1,64,64\] or unpacked \[1,16,16,16\] for 32x32, got \[1,16,8,8\]/);
  await assert.rejects(pipe.call({ ...base, height: 32, width: 32, maxSequenceLength: 513 }), /maxSequenceLength must be an integer in \[1, 512\]/);
  await assert.rejects(pipe.call({ ...base, height: 32, width: 32, prompt2: ["a", "b"] }), /2 prompt2 entries for 1 prompts/);
  await assert.rejects(pipe.call({ ...base, height: 32, width: 32, sigmas: [1, 0.5] }), /2 entries but numInferenceSteps is 1/);
  pipe.scheduler = EulerDiscreteScheduler.fromConfig({});
  await assert.rejects(pipe.call({ ...base, height: 32, width: 32 }), /FluxPipeline needs a flow-matching scheduler \(FlowMatchEulerDiscreteScheduler\), got EulerDiscreteScheduler/);
});

test("tsorch diffuse --scheduler flow-match-euler on flux_tiny: the PNG from a case's randn draw is within one level of diffusers' PNG", async (t) => {
  const skip = missing(EXPECTED);
  if (skip) return t.skip(skip);
  const c = (readJson(EXPECTED).cases as Case[]).find((x) => x.name === "flow_euler_32x48_4steps");
  const dir = tempDir("tsorch-diffuse-flux-");
  try {
    const latents = path.join(dir, "latents.safetensors");
    const values = Float32Array.from((c.initial_latents_unpacked as number[]).flat(Infinity as 1) as number[]);
    writeSafetensors(latents, [{ name: "latents", dtype: "F32", shape: [1, 16, c.latent_height, c.latent_width], bytes: new Uint8Array(values.buffer) }]);
    const out = path.join(dir, "out.png");
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, "diffuse", "--model", FLUX, "--prompt", c.prompt, "--height", String(c.height),
      "--width", String(c.width), "--steps", String(c.num_inference_steps), "--guidance-scale", String(c.guidance_scale), "--max-sequence-length",
      String(c.max_sequence_length), "--scheduler", "flow-match-euler", "--latents", latents, "--output", out]);
    assert.equal(stdout.trim(), out);
    const a = PNG.sync.read(readFileSync(out)), b = PNG.sync.read(readFileSync(path.join(FLUX, c.image_png)));
    assert.deepEqual([a.width, a.height], [b.width, b.height]);
    let worst = 0;
    for (let i = 0; i < a.data.length; i++) worst = Math.max(worst, Math.abs(a.data[i] - b.data[i]));
    assert.ok(worst <= 1, `PNG pixels differ by up to ${worst} levels`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
