/**
 * Qwen2, Qwen3, Phi-3 and GPT-2 against Hugging Face transformers' outputs on the tiny random
 * fixtures: full logits within 1e-4 absolute, and greedy ids (each row alone, and the left-padded
 * batch) equal with dynamic and static caches; one CLI forward/generate check. Also: LongRoPE tables
 * against transformers' values, and GPT-2 checkpoints saved from the bare GPT2Model.
 */
import assert from "node:assert/strict";
import { copyFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { openDevice } from "../src/devices/registry.js";
import { argmax } from "../src/tensor/ops.js";
import { readSafetensors, type RawTensor } from "../src/hub/index.js";
import { computeInvFreq, ropeCosSin } from "../src/nn/rotary.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { GPT2LMHeadModel } from "../src/transformers/models/gpt2.js";
import { Phi3ForCausalLM } from "../src/transformers/models/phi3.js";
import { maxAbsDiff, missing, readJson, TINY } from "./helpers/shared.js";
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";
import { tempDir } from "./helpers/temp_dir.js";


for (const arch of ["qwen2", "qwen3", "phi3", "gpt2"]) testTinyFixture(arch);

testCliOnFixture("gpt2");

test("gpt2: a checkpoint with bare GPT2Model names and causal-mask buffers loads (as transformers' base_model_prefix)", async (t) => {
  const dir = path.join(TINY, "gpt2");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const e = readJson(path.join(dir, "expected.json"));
  const bare = new Map<string, RawTensor>();
  for (const [k, v] of readSafetensors(path.join(dir, "model.safetensors"))) bare.set(k.replace(/^transformer\./, ""), v);
  const buffer = (name: string): RawTensor => ({ name, dtype: "float32", shape: [1], bytes: new Uint8Array(4) });
  for (const name of ["h.0.attn.bias", "h.0.attn.masked_bias", "h.1.attn.bias", "h.1.attn.masked_bias"]) bare.set(name, buffer(name));
  const model = new GPT2LMHeadModel(readJson(path.join(dir, "config.json")));
  model.loadWeights(bare, await openDevice("cpu"));
  const diff = maxAbsDiff((await model.logits(e.input_ids).data()) as Float32Array, e.logits.flat(2));
  assert.ok(diff < 1e-4, `max abs diff ${diff}`);
});

test("longrope: short factors up to original_max_position_embeddings, long ones beyond (transformers' values)", async () => {
  // transformers 5.18 _compute_longrope_parameters for head_dim 16, partial_rotary_factor 0.5,
  // max_position_embeddings 256, original_max_position_embeddings 10.
  const short = [1.0, 0.06666667014360428, 0.004999999888241291, 0.00033333332976326346];
  const long = [0.5, 0.02500000037252903, 0.0012499999720603228, 6.25000029685907e-05];
  const rope = computeInvFreq({
    rope_type: "longrope", rope_theta: 10000, partial_rotary_factor: 0.5, short_factor: [1, 1.5, 2, 3], long_factor: [2, 4, 8, 16],
    original_max_position_embeddings: 10, max_position_embeddings: 256,
  }, 16);
  assert.equal(rope.dim, 8);
  assert.deepEqual([...rope.invFreq], short);
  assert.deepEqual([...rope.long!.invFreq], long);
  assert.equal(rope.attentionScaling, Math.fround(1.5518504970878635));
  const cpu = await openDevice("cpu");
  const sin0 = async (pos: number) => ((await ropeCosSin(rope, [[0, pos]], cpu).sin.data()) as Float32Array)[8];
  assert.ok(Math.abs((await sin0(9)) - Math.sin(9 * short[0]) * rope.attentionScaling) < 1e-6);
  assert.ok(Math.abs((await sin0(10)) - Math.sin(10 * long[0]) * rope.attentionScaling) < 1e-6);
  // Phi-3 configs name LongRoPE "su" (or "yarn") in rope_scaling.
  const phi3 = new Phi3ForCausalLM({
    hidden_size: 64, num_attention_heads: 4, num_hidden_layers: 1, vocab_size: 8, max_position_embeddings: 256, original_max_position_embeddings: 10,
    rope_scaling: { type: "su", short_factor: Array(8).fill(1), long_factor: Array(8).fill(2) },
  });
  assert.equal(phi3.c.rope.long?.originalMaxPositions, 10);
});

test("phi3 longrope: generation past original_max_position_embeddings recomputes the cache, equal to uncached argmax", async (t) => {
  const src = path.join(TINY, "phi3");
  const skip = missing(src);
  if (skip) return t.skip(skip);
  // The tiny phi3 fixture with LongRoPE whose original context (10) the 7-token prompt + 12 new tokens cross.
  const dir = tempDir("tsorch-phi3-longrope-");
  const cfg = readJson(path.join(src, "config.json"));
  cfg.original_max_position_embeddings = 10;
  cfg.rope_parameters = { rope_type: "longrope", rope_theta: 10000, partial_rotary_factor: 1, original_max_position_embeddings: 10, short_factor: Array(8).fill(1.5), long_factor: [1, 2, 4, 8, 16, 32, 64, 128] };
  writeFileSync(path.join(dir, "config.json"), JSON.stringify(cfg));
  copyFileSync(path.join(src, "model.safetensors"), path.join(dir, "model.safetensors"));
  const model = await AutoModelForCausalLM.fromPretrained(dir);
  const prompt = readJson(path.join(src, "expected.json")).input_ids[0] as number[];
  const ids = [...prompt];
  for (let i = 0; i < 12; i++) {
    const logits = model.logits([ids]);
    ids.push(await argmax(logits.select(1, ids.length - 1), -1).item());
  }
  for (const cacheImplementation of ["dynamic", "static"] as const) {
    const out = await model.generate(prompt, { maxNewTokens: 12, eosTokenId: [], cacheImplementation });
    assert.deepEqual(out, ids, cacheImplementation);
  }
});
