/**
 * Qwen3.5 and Qwen3.5-MoE in their Hub layouts (Qwen3_5ForConditionalGeneration,
 * Qwen3_5MoeForConditionalGeneration: text config under `text_config`, language-model weights
 * under `model.language_model.*`, a vision tower that is skipped) against transformers' outputs on
 * the tiny qwen3_5 and qwen3_5_moe fixtures: full logits within 1e-4; greedy ids alone and
 * left-padded, dynamic and static cache; the CLI. Also the layout rules: split per-expert weights
 * load like the fused ones, `mtp.*` is skipped, and skipping never hides a missing or unexpected
 * language-model weight.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { openDevice } from "../src/devices/registry.js";
import { readSafetensors } from "../src/hub/index.js";
import { ConfigError } from "../src/transformers/configuration.js";
import { WeightLoadError } from "../src/transformers/modeling_utils.js";
import { Qwen3_5ForConditionalGeneration } from "../src/transformers/models/qwen3_5.js";
import { Qwen3_5MoeForConditionalGeneration } from "../src/transformers/models/qwen3_5_moe.js";
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";
import { raw, splitExperts } from "./helpers/split_experts.js";
import { CLI, maxAbsDiff, missing, readJson, TINY } from "./helpers/shared.js";

const run = promisify(execFile);

for (const arch of ["qwen3_5", "qwen3_5_moe"]) {
  testTinyFixture(arch);
  testCliOnFixture(arch);
}

/** The fixture's tensors, its config and expected outputs (undefined after skipping when ../shared is absent). */
function fixture(t: { skip(msg: string): void }, arch: string) {
  const dir = path.join(TINY, arch);
  const skip = missing(dir);
  if (skip) return void t.skip(skip);
  return { dir, weights: readSafetensors(path.join(dir, "model.safetensors")), config: readJson(path.join(dir, "config.json")), e: readJson(path.join(dir, "expected.json")) };
}

test("qwen3_5_moe: split per-expert weights (save_pretrained's layout) give transformers' logits", async (t) => {
  const f = fixture(t, "qwen3_5_moe");
  if (!f) return;
  const split = splitExperts(f.weights);
  assert.ok(split.has("model.language_model.layers.0.mlp.experts.7.up_proj.weight") && !split.has("model.language_model.layers.0.mlp.experts.gate_up_proj"));
  const model = new Qwen3_5MoeForConditionalGeneration(f.config);
  model.loadWeights(split, await openDevice("cpu"));
  const diff = maxAbsDiff((await model.logits(f.e.input_ids).data()) as Float32Array, f.e.logits.flat(2));
  assert.ok(diff < 1e-4, `max abs diff ${diff}`);
  split.delete("model.language_model.layers.2.mlp.experts.5.down_proj.weight");
  assert.throws(() => new Qwen3_5MoeForConditionalGeneration(f.config).loadWeights(split, model.device), /split experts under 'model\.language_model\.layers\.2\.mlp\.experts' but no '.*\.5\.down_proj\.weight'/);
});

test("qwen3_5: mtp.* and model.visual.* are skipped; a missing or unknown language-model weight is still an error", async (t) => {
  const f = fixture(t, "qwen3_5");
  if (!f) return;
  const cpu = await openDevice("cpu");
  const withMtp = new Map(f.weights);
  const mtp = "mtp.layers.0.mlp.up_proj.weight";
  withMtp.set(mtp, raw(mtp, [2], new Uint8Array(8)));
  const model = new Qwen3_5ForConditionalGeneration(f.config);
  model.loadWeights(withMtp, cpu);
  assert.ok(maxAbsDiff((await model.logits(f.e.input_ids).data()) as Float32Array, f.e.logits.flat(2)) < 1e-4);

  const missingOne = new Map(f.weights);
  missingOne.delete("model.language_model.layers.1.mlp.up_proj.weight");
  assert.throws(() => new Qwen3_5ForConditionalGeneration(f.config).loadWeights(missingOne, cpu), (e: Error) => e instanceof WeightLoadError && /missing 1 weight\(s\).*model\.layers\.1\.mlp\.up_proj\.weight/.test(e.message));
  const extra = new Map(f.weights);
  const stray = "model.language_model.layers.1.mlp.extra.weight";
  extra.set(stray, raw(stray, [2], new Uint8Array(8)));
  assert.throws(() => new Qwen3_5ForConditionalGeneration(f.config).loadWeights(extra, cpu), /1 unexpected weight\(s\).*model\.layers\.1\.mlp\.extra\.weight/);
  // A renamed tensor: both names in one message.
  const renamed = new Map(missingOne);
  renamed.set(stray, raw(stray, [2], new Uint8Array(8)));
  assert.throws(() => new Qwen3_5ForConditionalGeneration(f.config).loadWeights(renamed, cpu),
    /missing 1 weight\(s\).*model\.layers\.1\.mlp\.up_proj\.weight; and has 1 unexpected weight\(s\).*model\.layers\.1\.mlp\.extra\.weight/);
  assert.throws(() => new Qwen3_5ForConditionalGeneration({ ...f.config, text_config: undefined }), (e: Error) => e instanceof ConfigError && /no 'text_config'/.test(e.message));
});

test("qwen3_5: the skipped vision tower is listed once in a debug line (TSORCH_DEBUG=1)", async (t) => {
  const f = fixture(t, "qwen3_5");
  if (!f) return;
  const { stderr } = await run(process.execPath, [CLI, "forward", "--model", f.dir, "--input-ids", "1,2,3", "--output", "json"], { env: { ...process.env, TSORCH_DEBUG: "1" }, maxBuffer: 1 << 26 });
  const lines = stderr.split("\n").filter((l) => l.includes("skipped"));
  assert.equal(lines.length, 1, stderr);
  assert.match(lines[0], /Qwen3_5ForConditionalGeneration: skipped 21 checkpoint tensor\(s\) text generation does not use: model\.visual\.\* \(21\)/);
});
