/**
 * End to end through a mock Hub on 127.0.0.1: `tsorch generate --model org/name` downloads into
 * the Hugging Face cache layout, loads and generates transformers' greedy text; a second run is
 * served from the cache without a single request.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { startMockHub } from "./helpers/mock_hub.js";
import { CLI, missing, readJson, STORIES } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

const run = promisify(execFile);

test("download -> cache layout -> load -> generate, then a cached second run with no request", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const id = "tsorch-test/stories260K";
  const hub = await startMockHub({ [id]: STORIES });
  try {
    const cache = tempDir("tsorch-hub-");
    const env = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.url };
    const g = readJson(path.join(STORIES, "expected.json")).generation[0];
    const args = [CLI, "generate", "--model", id, "--prompt", g.prompt, "--max-new-tokens", "64"];

    const first = await run(process.execPath, args, { env });
    assert.equal(first.stdout, g.greedy_text + "\n");
    assert.ok(hub.requests.length > 0);
    const repo = path.join(cache, "models--tsorch-test--stories260K");
    const commit = readFileSync(path.join(repo, "refs", "main"), "utf8").trim();
    assert.equal(commit, hub.commit(id));
    for (const f of ["config.json", "model.safetensors", "tokenizer.json"]) assert.ok(existsSync(path.join(repo, "snapshots", commit, f)), f);

    const before = hub.requests.length;
    const second = await run(process.execPath, args, { env });
    assert.equal(second.stdout, g.greedy_text + "\n");
    assert.equal(hub.requests.length, before, "the cached run made requests");
  } finally {
    await hub.close();
  }
});
