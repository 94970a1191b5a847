import { test } from "node:test";
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CheckpointError, loadConfig, loadGenerationConfig, readJsonFile } from "../src/hub/index.js";
import { missing, STORIES as stories } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

test("loadConfig and loadGenerationConfig read stories260K", async (t) => {
  const skip = missing(stories);
  if (skip) return t.skip(skip);
  const config = await loadConfig(stories);
  assert.equal(config.model_type, "llama");
  assert.equal(config.hidden_size, 64);
  assert.deepEqual(config.architectures, ["LlamaForCausalLM"]);
  const generation = await loadGenerationConfig(stories);
  assert.equal(generation.bos_token_id, 1);
});

test("missing and malformed JSON files give clear errors", async () => {
  const dir = tempDir("tsorch-hub-");
  const config = join(dir, "config.json");
  await assert.rejects(loadConfig(dir), (e: unknown) => e instanceof CheckpointError && e.message === `file not found: ${config}`);
  assert.deepEqual(await loadGenerationConfig(dir), {});

  writeFileSync(config, "{ \"model_type\": ");
  await assert.rejects(readJsonFile(config), (e: unknown) =>
    e instanceof CheckpointError && e.message.startsWith(`${config} is not valid JSON: `) && !e.message.includes("\n"));
  writeFileSync(config, "[1, 2]");
  await assert.rejects(loadConfig(dir), new CheckpointError(`${config}: expected a JSON object`));
  writeFileSync(join(dir, "generation_config.json"), "nope");
  await assert.rejects(loadGenerationConfig(dir), /generation_config\.json is not valid JSON/);
  rmSync(dir, { recursive: true });
});
