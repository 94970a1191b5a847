/**
 * The second batch of decoder families (SmolLM3, GLM-4-MoE, DeepSeek-V3, gpt-oss) against Hugging
 * Face transformers' outputs on their tiny fixtures (../shared/fixtures/tiny, notes in
 * FAMILIES2.md): full logits within 1e-4 absolute; greedy ids of single rows and of a left-padded
 * batch, with dynamic and static caches; the CLI (`tsorch forward`, `tsorch generate --output json`);
 * the older Hub config spellings (top-level rope_theta + rope_scaling) giving the same logits; the
 * multi-token-prediction layers of DeepSeek-V3 / GLM-4.5 files skipped by name; and MLA caching
 * only its compressed latent.
 */
import assert from "node:assert/strict";
import { symlinkSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { openDevice } from "../src/devices/registry.js";
import { readSafetensors, type RawTensor } from "../src/hub/index.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { AutoModelForCausalLM, KVCache, WeightLoadError } from "../src/transformers/index.js";
import type { RawConfig } from "../src/transformers/configuration.js";
import { DeepseekV3ForCausalLM } from "../src/transformers/models/deepseek_v3.js";
import { Glm4MoeForCausalLM } from "../src/transformers/models/glm4_moe.js";
import { checkLogits, fixtureExpected, testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";
import { missing, readJson, TINY } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

for (const arch of ["smollm3", "glm4_moe", "deepseek_v3", "gpt_oss"]) {
  testTinyFixture(arch);
  testCliOnFixture(arch);
}

/** The config.json of each fixture as the older Hub files spell it (see FAMILIES2.md, "Config spelling"). */
const LEGACY: Record<string, (c: RawConfig) => RawConfig> = {
  // HuggingFaceTB/SmolLM3-3B: top-level rope_theta, rope_scaling null.
  smollm3: ({ rope_parameters: _, ...c }) => ({ ...c, rope_theta: 5e6, rope_scaling: null }),
  // zai-org/GLM-4.5: top-level rope_theta and partial_rotary_factor, rope_scaling null.
  glm4_moe: ({ rope_parameters: _, ...c }) => ({ ...c, rope_theta: 1e6, partial_rotary_factor: 0.5, rope_scaling: null }),
  // deepseek-ai/DeepSeek-V3: rope_scaling with the old key "type"; no rope_interleave (default true).
  deepseek_v3: ({ rope_parameters: _, rope_interleave: __, ...c }) => ({
    ...c, rope_theta: 10000,
    rope_scaling: { type: "yarn", factor: 40, mscale: 1.0, mscale_all_dim: 1.0, beta_fast: 32, beta_slow: 1, original_max_position_embeddings: 4096 },
  }),
  // openai/gpt-oss-20b: rope_scaling with "rope_type".
  gpt_oss: ({ rope_parameters: _, ...c }) => ({
    ...c, rope_theta: 150000,
    rope_scaling: { rope_type: "yarn", factor: 32.0, beta_fast: 32.0, beta_slow: 1.0, truncate: false, original_max_position_embeddings: 4096 },
  }),
};

for (const [arch, respell] of Object.entries(LEGACY)) {
  test(`${arch} (tiny): the older Hub config spelling (top-level rope_theta + rope_scaling) gives the same logits`, async (t) => {
    const src = path.join(TINY, arch);
    const skip = missing(src);
    if (skip) return t.skip(skip);
    const dir = tempDir(`tsorch-${arch}-legacy-`);
    const config = respell(readJson(path.join(src, "config.json")));
    assert.equal(config.rope_parameters, undefined);
    writeFileSync(path.join(dir, "config.json"), JSON.stringify(config));
    symlinkSync(path.join(src, "model.safetensors"), path.join(dir, "model.safetensors"));
    await checkLogits(await AutoModelForCausalLM.fromPretrained(dir), fixtureExpected(arch), 1e-4);
  });
}

for (const [arch, Model] of [["glm4_moe", Glm4MoeForCausalLM], ["deepseek_v3", DeepseekV3ForCausalLM]] as const) {
  test(`${arch} (tiny): multi-token-prediction layer model.layers.{num_hidden_layers}.* is skipped by name, other strays are not`, async (t) => {
    const dir = path.join(TINY, arch);
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const config = readJson(path.join(dir, "config.json"));
    const n = config.num_hidden_layers as number;
    const weights = readSafetensors(path.join(dir, "model.safetensors"));
    const withLayer = (index: number) => {
      const out = new Map(weights);
      for (const [name, raw] of weights) {
        const m = /^model\.layers\.0\.(.*)$/.exec(name);
        if (m) out.set(`model.layers.${index}.${m[1]}`, { ...raw, name: `model.layers.${index}.${m[1]}` } as RawTensor);
      }
      out.set(`model.layers.${index}.eh_proj.weight`, weights.get("lm_head.weight")!);
      return out;
    };
    const cpu = await openDevice("cpu");
    const model = new Model(config);
    model.loadWeights(withLayer(n), cpu);
    const e = fixtureExpected(arch);
    await checkLogits(model, e, 1e-4);
    assert.throws(() => new Model(config).loadWeights(withLayer(n + 1), cpu), (err: Error) =>
      err instanceof WeightLoadError && new RegExp(`unexpected weight\\(s\\) for ${Model.name}: model\\.layers\\.${n + 1}\\.`).test(err.message));
  });
}

test("deepseek_v3 (tiny): the KV cache holds the compressed latent (kv_lora_rank + qk_rope_head_dim per position), not per-head keys and values", async (t) => {
  const dir = path.join(TINY, "deepseek_v3");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const config = readJson(path.join(dir, "config.json"));
  const model = await AutoModelForCausalLM.fromPretrained(dir);
  const e = fixtureExpected("deepseek_v3");
  const cache = new KVCache(model.numLayers, "static", 16);
  const L = e.input_ids[0].length;
  model.forward({ inputIds: model.idsTensor([e.input_ids[0]]), positionIds: [[...Array(L).keys()]], attentionMask: null, cache });
  for (const layer of cache.layers) {
    // LayerKVCache's buffers are private; their shapes are what this test is about.
    const { keys, values } = layer as unknown as { keys: Tensor; values: Tensor };
    assert.deepEqual(keys.shape, [1, 16, 1, config.kv_lora_rank]); // [B, capacity, H, D]
    assert.deepEqual(values.shape, [1, 16, 1, config.qk_rope_head_dim]);
    assert.equal(layer.seqLength, L);
  }
});

test("deepseek_v3 (tiny) loaded as bfloat16: e_score_correction_bias stays float32 (as transformers keeps it), weights follow the dtype", async (t) => {
  const dir = path.join(TINY, "deepseek_v3");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(dir, { dtype: "bfloat16" });
  const sd = model.stateDict();
  assert.equal(sd.get("model.layers.1.mlp.gate.e_score_correction_bias")!.dtype, "float32");
  assert.equal(sd.get("model.layers.1.mlp.gate.weight")!.dtype, "bfloat16");
  await model.to("cpu", "float16");
  assert.equal(model.stateDict().get("model.layers.1.mlp.gate.e_score_correction_bias")!.dtype, "float32");
  const e = fixtureExpected("deepseek_v3");
  const logits = (await model.logits(e.input_ids).data()) as Float32Array;
  assert.ok(logits.every(Number.isFinite));
});
