/**
 * The `tsorch` CLI as a user runs it: generation output equals transformers' greedy text, JSON
 * scripting output, and one-line errors with a non-zero exit for bad input.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { CLI, missing, readJson, STORIES } from "./helpers/shared.js";
import { testCliOnFixture } from "./helpers/fixture_checks.js";
import { tempDir } from "./helpers/temp_dir.js";

const run = promisify(execFile);

async function tsorch(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, maxBuffer: 1 << 26 });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

/** A copy of stories260K under /tmp whose files a test may change. */
function storiesCopy(): string {
  const dir = tempDir("tsorch-cli-");
  for (const f of ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]) {
    copyFileSync(path.join(STORIES, f), path.join(dir, f));
  }
  return dir;
}

function assertOneLineError(r: { code: number; stderr: string }, pattern: RegExp): void {
  assert.notEqual(r.code, 0, "expected a non-zero exit");
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `expected a one-line error, got:\n${r.stderr}`);
  assert.match(lines[0], /^tsorch: error: /);
  assert.match(lines[0], pattern);
}

test("generate prints transformers' greedy text for both prompts and the 200-token story", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const e = readJson(path.join(STORIES, "expected.json"));
  for (const g of e.generation) {
    const r = await tsorch(["generate", "--model", STORIES, "--prompt", g.prompt, "--max-new-tokens", "64", "--do-sample", "false"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, g.greedy_text + "\n");
  }
  const bos = e.greedy_from_bos;
  const r = await tsorch(["generate", "--model", STORIES, "--input-ids", "1", "--max-new-tokens", String(bos.new_ids.length), "--output", "json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(out.new_token_ids, bos.new_ids);
  assert.equal(out.text, bos.text);
});

test("generate reads the prompt from stdin", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const e = readJson(path.join(STORIES, "expected.json"));
  const child = execFile(process.execPath, [CLI, "generate", "--model", STORIES, "--max-new-tokens", "64"]);
  child.stdin!.end(e.generation[0].prompt + "\n");
  let stdout = "";
  child.stdout!.on("data", (d) => (stdout += d));
  const code = await new Promise((res) => child.on("close", res));
  assert.equal(code, 0);
  assert.equal(stdout, e.generation[0].greedy_text + "\n");
});

testCliOnFixture("llama");

test("bad input: one-line errors, non-zero exit", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const gen = (model: string, ...more: string[]) => tsorch(["generate", "--model", model, "--prompt", "Once", "--max-new-tokens", "2", ...more]);

  assertOneLineError(await gen("/nonexistent/model-folder"), /not found/);
  assertOneLineError(await gen(STORIES, "--device", "tpu9"), /--device: unknown device 'tpu9'; available: cpu/);
  assertOneLineError(await gen(STORIES, "--dtype", "float8"), /--dtype must be one of auto, float32, bfloat16, float16, int8, int4, got 'float8'/);
  assertOneLineError(await tsorch(["generate", "--model", STORIES, "--input-ids", "1,x"]), /--input-ids/);
  assertOneLineError(await tsorch(["generate", "--model", STORIES, "--prompt", "x", "--max-new-tokens", "many"]), /--max-new-tokens/);

  // An uncached Hub id with no network (an endpoint on a closed local port).
  const cache = tempDir("tsorch-cache-");
  const offline = await tsorch(["generate", "--model", "tsorch-test/not-cached", "--prompt", "x"], { HF_HUB_CACHE: cache, HF_ENDPOINT: "http://127.0.0.1:9" });
  assertOneLineError(offline, /not in the Hugging Face cache|could not be reached/);

  // Prompt at max_position_embeddings (512) with no length set: transformers' default length leaves no room.
  const long = Array.from({ length: 600 }, () => "1").join(",");
  assertOneLineError(await tsorch(["generate", "--model", STORIES, "--input-ids", long]), /600 tokens, .*max_position_embeddings \(512\).*set --max-new-tokens/);

  // Truncated safetensors.
  let dir = storiesCopy();
  const st = readFileSync(path.join(dir, "model.safetensors"));
  writeFileSync(path.join(dir, "model.safetensors"), st.subarray(0, st.length - 1000));
  assertOneLineError(await gen(dir), /model\.safetensors/);

  // Corrupt header.
  dir = storiesCopy();
  const bad = Buffer.from(st);
  bad.write("{{{{", 8);
  writeFileSync(path.join(dir, "model.safetensors"), bad);
  assertOneLineError(await gen(dir), /model\.safetensors/);

  // Unsupported architecture names the supported ones.
  dir = storiesCopy();
  const cfg = readJson(path.join(dir, "config.json"));
  writeFileSync(path.join(dir, "config.json"), JSON.stringify({ ...cfg, architectures: ["FancyNetForCausalLM"], model_type: "fancy" }));
  assertOneLineError(await gen(dir), /unsupported architecture FancyNetForCausalLM; supported: .*LlamaForCausalLM/);

  // Shape mismatch: config says a different hidden size than the weights.
  dir = storiesCopy();
  writeFileSync(path.join(dir, "config.json"), JSON.stringify({ ...cfg, intermediate_size: 170 }));
  assertOneLineError(await gen(dir), /shape mismatch for weight 'model\.layers\.0\.mlp\.(gate|up|down)_proj\.weight'/);

  // A weight missing from the checkpoint (config asks for one more layer).
  dir = storiesCopy();
  writeFileSync(path.join(dir, "config.json"), JSON.stringify({ ...cfg, num_hidden_layers: 6 }));
  assertOneLineError(await gen(dir), /missing .*model\.layers\.5\./);

  // A weight unexpected in the checkpoint (config asks for one layer fewer).
  dir = storiesCopy();
  writeFileSync(path.join(dir, "config.json"), JSON.stringify({ ...cfg, num_hidden_layers: 4 }));
  assertOneLineError(await gen(dir), /unexpected .*model\.layers\.4\./);
});

test("--dtype, --device, serve's --port and --max-model-len are usage errors (exit 2) naming the flag, before anything loads", async () => {
  const cases: [string[], RegExp][] = [
    [["generate", "--model", "/nonexistent", "--dtype", "int3", "--prompt", "x"], /--dtype must be one of auto, float32, bfloat16, float16, int8, int4, got 'int3'/],
    [["forward", "--model", "/nonexistent", "--device", "cuda", "--input-ids", "1"], /--device: unknown device 'cuda'; available: cpu, webgpu/],
    [["serve", "--model", "/nonexistent", "--port", "99999"], /--port must be an integer in \[0, 65535\], got 99999/],
    [["serve", "--model", "/nonexistent", "--max-model-len", "-1"], /--max-model-len must be a positive integer, got -1/],
  ];
  for (const [args, re] of cases) {
    const r = await run(process.execPath, [CLI, ...args]).then(() => ({ code: 0, stderr: "" }), (e) => e as { code: number; stderr: string });
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, re);
  }
});
