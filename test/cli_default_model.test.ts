/**
 * The model the package ships (models/stories260K): `tsorch generate` and `tsorch forward` use it
 * when --model is absent, offline (no Hub, an empty HF cache), from a folder outside the project;
 * its output equals transformers' on ../shared/models/stories260K.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { CLI, maxAbsDiff, missing, readJson, ROOT, STORIES } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

const run = promisify(execFile);
const SHIPPED = path.join(ROOT, "models/stories260K");

/** Run the CLI from an empty folder with the Hub unreachable and an empty HF cache. */
async function offline(args: string[]): Promise<string> {
  const cwd = tempDir("tsorch-default-");
  try {
    const env = { ...process.env, HF_HUB_OFFLINE: "1", HF_HUB_CACHE: cwd, HF_HOME: cwd, HF_ENDPOINT: "http://127.0.0.1:9" };
    return (await run(process.execPath, [CLI, ...args], { cwd, env, maxBuffer: 1 << 26 })).stdout;
  } finally {
    rmSync(cwd, { recursive: true });
  }
}

test("the shipped model is ../shared's stories260K, with its licence and origin", (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  for (const f of ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]) {
    assert.ok(readFileSync(path.join(SHIPPED, f)).equals(readFileSync(path.join(STORIES, f))), f);
  }
  assert.match(readFileSync(path.join(SHIPPED, "LICENSE"), "utf8"), /MIT License/);
  assert.match(readFileSync(path.join(SHIPPED, "README.md"), "utf8"), /llama2\.c/);
  const pkg = readJson(path.join(ROOT, "package.json"));
  assert.ok(pkg.files.includes("models"), "package.json files ships models/");
});

test("generate without --model: transformers' greedy text, offline", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const g = readJson(path.join(STORIES, "expected.json")).generation[0];
  assert.equal(g.prompt, "Once upon a time");
  const stdout = await offline(["generate", "--prompt", g.prompt, "--max-new-tokens", String(g.greedy_new_ids.length)]);
  assert.equal(stdout, g.greedy_text + "\n");
});

test("forward without --model: transformers' last-position logits within 1e-4", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const g = readJson(path.join(STORIES, "expected.json")).generation[0];
  const out = JSON.parse(await offline(["forward", "--input-ids", g.input_ids.join(","), "--output", "json"]));
  assert.equal(out.logits.length, g.input_ids.length);
  assert.ok(maxAbsDiff(out.logits.at(-1), g.last_logits) < 1e-4);
});

test("an explicit --model still wins over the shipped one", async () => {
  const err = await offline(["generate", "--model", "/nonexistent/model-folder", "--prompt", "x"]).then(() => "", (e) => String(e.stderr));
  assert.match(err, /model folder not found: \/nonexistent\/model-folder/);
});
