/**
 * Gemma 4 in its Hub layout (Gemma4ForConditionalGeneration: text config under `text_config`,
 * language-model weights under `model.language_model.*`, vision/audio towers skipped) against
 * transformers' outputs on the tiny gemma4 (per-layer inputs, KV sharing, double-wide MLP,
 * proportional rope) and gemma4_moe (dense MLP + experts per layer, keys = values on full layers)
 * fixtures: full logits within 1e-4; greedy ids alone and left-padded, dynamic and static cache;
 * the CLI. Also: proportional rope frequencies, split experts, k/v weights of KV-sharing layers
 * skipped as transformers does, and the text-only layout (Gemma4ForCausalLM, `model.*`).
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import { openDevice } from "../src/devices/registry.js";
import { readSafetensors, type RawTensor } from "../src/hub/index.js";
import { computeInvFreq } from "../src/nn/rotary.js";
import { Gemma4ForCausalLM, Gemma4ForConditionalGeneration } from "../src/transformers/models/gemma4.js";
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";
import { maxAbsDiff, missing, readJson, TINY } from "./helpers/shared.js";
import { raw, splitExperts } from "./helpers/split_experts.js";

for (const arch of ["gemma4", "gemma4_moe"]) {
  testTinyFixture(arch);
  testCliOnFixture(arch);
}

test("proportional rope: transformers' inverse frequencies over the whole head, the non-rotated ones 0", () => {
  // transformers 5.18 ROPE_INIT_FUNCTIONS["proportional"] for the gemma4 fixture's full layers:
  // head_dim 32 (global_head_dim), partial_rotary_factor 0.25, rope_theta 1e6.
  const want = [1.0, 0.4216965138912201, 0.17782793939113617, 0.07498941570520401, ...new Array(12).fill(0)];
  const t = computeInvFreq({ rope_type: "proportional", rope_theta: 1e6, partial_rotary_factor: 0.25 }, 32);
  assert.equal(t.dim, 32);
  assert.deepEqual(Array.from(t.invFreq), want.map(Math.fround));
});

/** Logits of `model` after loading `weights` on the cpu, against the fixture's expected logits. */
async function logitsDiff(model: Gemma4ForCausalLM, weights: Map<string, RawTensor>, e: { input_ids: number[][]; logits: number[][][] }): Promise<number> {
  model.loadWeights(weights, await openDevice("cpu"));
  return maxAbsDiff((await model.logits(e.input_ids).data()) as Float32Array, e.logits.flat(2));
}

test("gemma4: k/v weights a file holds for KV-sharing layers are skipped; text-only names load as Gemma4ForCausalLM", async (t) => {
  const dir = path.join(TINY, "gemma4");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const config = readJson(path.join(dir, "config.json")), e = readJson(path.join(dir, "expected.json"));
  const weights = readSafetensors(path.join(dir, "model.safetensors"));
  const extra = new Map(weights);
  for (const name of ["k_proj.weight", "v_proj.weight", "k_norm.weight"]) {
    const full = `model.language_model.layers.3.self_attn.${name}`;
    extra.set(full, raw(full, [4], new Uint8Array(16)));
  }
  assert.ok((await logitsDiff(new Gemma4ForConditionalGeneration(config), extra, e)) < 1e-4);
  // The same weights as a Gemma4ForCausalLM checkpoint (text_config, `model.*`, no towers).
  const text = new Map([...weights].filter(([n]) => n.startsWith("model.language_model.")).map(([n, v]) => [n.replace("model.language_model.", "model."), v]));
  assert.ok((await logitsDiff(new Gemma4ForCausalLM({ ...config.text_config, architectures: ["Gemma4ForCausalLM"] }), text, e)) < 1e-4);
});

test("gemma4_moe: split per-expert weights give transformers' logits", async (t) => {
  const dir = path.join(TINY, "gemma4_moe");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const split = splitExperts(readSafetensors(path.join(dir, "model.safetensors")));
  assert.ok(split.has("model.language_model.layers.1.experts.3.gate_proj.weight"));
  const diff = await logitsDiff(new Gemma4ForConditionalGeneration(readJson(path.join(dir, "config.json"))), split, readJson(path.join(dir, "expected.json")));
  assert.ok(diff < 1e-4, `max abs diff ${diff}`);
});

test("gemma4_moe: a config spelling the full layers' sizes as per_layer_config (as transformers writes it) loads the same model", async (t) => {
  const dir = path.join(TINY, "gemma4_moe");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const config = readJson(path.join(dir, "config.json"));
  const { global_head_dim: _h, num_global_key_value_heads: _k, ...text } = config.text_config;
  // transformers 5.18 Gemma4TextConfig(**text_config).to_dict()["per_layer_config"] for this fixture.
  const respelled = { ...config, text_config: { ...text, per_layer_config: { 1: { head_dim: 32, num_key_value_heads: 1 }, 3: { head_dim: 32, num_key_value_heads: 1 } } } };
  const diff = await logitsDiff(new Gemma4ForConditionalGeneration(respelled), readSafetensors(path.join(dir, "model.safetensors")), readJson(path.join(dir, "expected.json")));
  assert.ok(diff < 1e-4, `max abs diff ${diff}`);
});
