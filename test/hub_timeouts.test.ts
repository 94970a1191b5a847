/**
 * Hub requests that hang or break: a server that accepts and never answers, a download that stops
 * sending, a download cut mid-file (resumes with a Range request in the same call), and a
 * .incomplete file left by an earlier run (the next call resumes it). Timeouts are shortened
 * through HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT; only 127.0.0.1 servers are contacted.
 */
import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { join } from "node:path";
import { HubError, resolveModel } from "../src/hub/index.js";
import { startMockHub, writeSafetensors } from "./helpers/mock_hub.js";
import { tempDir } from "./helpers/temp_dir.js";

const ID = "tsorch-test/timeouts";
let repo: string;
let weights: Buffer;
let cache: string;

before(() => {
  for (const name of ["HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HOME", "HUGGINGFACE_HUB_CACHE", "HF_HUB_CACHE"]) delete process.env[name];
  // Generous by default (this machine may be busy); the test of each timeout shortens that one.
  process.env.HF_HUB_ETAG_TIMEOUT = "5";
  process.env.HF_HUB_DOWNLOAD_TIMEOUT = "5";
  repo = tempDir("tsorch-timeouts-repo-");
  writeFileSync(join(repo, "config.json"), JSON.stringify({ model_type: "llama" }));
  const values = Float32Array.from({ length: 64 * 1024 }, (_, i) => Math.sin(i));
  writeSafetensors(join(repo, "model.safetensors"), [{ name: "w", dtype: "F32", shape: [64, 1024], bytes: new Uint8Array(values.buffer) }]);
  weights = readFileSync(join(repo, "model.safetensors"));
});

beforeEach(() => {
  cache = tempDir("tsorch-timeouts-cache-");
});

after(() => {
  delete process.env.HF_HUB_ETAG_TIMEOUT;
  delete process.env.HF_HUB_DOWNLOAD_TIMEOUT;
  rmSync(repo, { recursive: true, force: true });
});

const hubError = (pattern: RegExp) => (e: unknown) => {
  assert.ok(e instanceof HubError, `expected HubError, got ${(e as Error)?.stack ?? e}`);
  assert.match(e.message, pattern);
  assert.ok(!e.message.includes("\n"), "one line");
  return true;
};

const blobOf = (content: Buffer) => join(cache, "models--tsorch-test--timeouts", "blobs", createHash("sha256").update(content).digest("hex"));

test("a server that accepts and never answers: metadata requests time out", { timeout: 20_000 }, async () => {
  const sockets: Socket[] = [];
  const server = createServer((s) => sockets.push(s)); // reads nothing, writes nothing
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.env.HF_HUB_ETAG_TIMEOUT = "0.5";
  try {
    await assert.rejects(resolveModel(ID, { endpoint, cacheDir: cache, progress: false }),
      hubError(new RegExp(`no response from ${endpoint}/api/models/${ID}/revision/main within 0.5 s \\(HF_HUB_ETAG_TIMEOUT\\)`)));
    assert.ok(sockets.length > 0, "the request reached the server");
  } finally {
    process.env.HF_HUB_ETAG_TIMEOUT = "5";
    for (const s of sockets) s.destroy();
    server.close();
    rmSync(cache, { recursive: true, force: true });
  }
});

test("a download that sends headers and then no byte fails with a clear error", { timeout: 20_000 }, async () => {
  const hub = await startMockHub({ [ID]: repo }, { stall: ["model.safetensors"] });
  process.env.HF_HUB_DOWNLOAD_TIMEOUT = "0.5";
  try {
    await assert.rejects(resolveModel(ID, { endpoint: hub.url, cacheDir: cache, progress: false }),
      hubError(/downloading model\.safetensors of tsorch-test\/timeouts failed at byte 0 of 262\d+: no data from http:\/\/127\.0\.0\.1:\d+\/tsorch-test\/timeouts\/resolve\/[0-9a-f]{40}\/model\.safetensors within 0\.5 s \(HF_HUB_DOWNLOAD_TIMEOUT\)/));
  } finally {
    process.env.HF_HUB_DOWNLOAD_TIMEOUT = "5";
    await hub.close();
    rmSync(cache, { recursive: true, force: true });
  }
});

test("a download cut mid-file resumes with a Range request and completes", { timeout: 20_000 }, async () => {
  const cut = { file: "model.safetensors", after: 100_000, times: 2 };
  const hub = await startMockHub({ [ID]: repo }, { cut });
  try {
    const folder = await resolveModel(ID, { endpoint: hub.url, cacheDir: cache, progress: false });
    assert.ok(readFileSync(join(folder, "model.safetensors")).equals(weights), "the resumed file equals the original");
    const ranges = hub.requests.filter((r) => r.url.endsWith("/model.safetensors")).map((r) => r.range);
    // The size probe, the first download (cut), a resume (cut again), a resume to the end. Each
    // resume starts after the bytes received (at most the 100000 sent per cut; the client may drop
    // some it had not taken when the connection closed).
    assert.deepEqual(ranges.slice(0, 2), ["bytes=0-0", undefined]);
    assert.equal(ranges.length, 4);
    const starts = ranges.slice(2).map((r) => Number(new RegExp(`^bytes=(\\d+)-${weights.length - 1}$`).exec(r ?? "")?.[1]));
    assert.ok(starts[0] > 0 && starts[0] <= 100_000 && starts[1] > starts[0] && starts[1] <= starts[0] + 100_000, `resumed at ${ranges.slice(2)}`);
    assert.equal(cut.times, 0);
    assert.ok(!readdirSync(join(blobOf(weights), "..")).some((f) => f.endsWith(".incomplete")), "no .incomplete left");
  } finally {
    await hub.close();
    rmSync(cache, { recursive: true, force: true });
  }
});

test("an .incomplete file left by an earlier run is resumed, not downloaded again", { timeout: 20_000 }, async () => {
  const hub = await startMockHub({ [ID]: repo });
  try {
    mkdirSync(join(blobOf(weights), ".."), { recursive: true });
    writeFileSync(`${blobOf(weights)}.incomplete`, weights.subarray(0, 123_456));
    const folder = await resolveModel(ID, { endpoint: hub.url, cacheDir: cache, progress: false });
    assert.ok(readFileSync(join(folder, "model.safetensors")).equals(weights));
    const ranges = hub.requests.filter((r) => r.url.endsWith("/model.safetensors")).map((r) => r.range);
    assert.deepEqual(ranges, ["bytes=0-0", `bytes=123456-${weights.length - 1}`]);
    assert.ok(!existsSync(`${blobOf(weights)}.incomplete`));
  } finally {
    await hub.close();
    rmSync(cache, { recursive: true, force: true });
  }
});

test("invalid timeout settings are refused naming the variable", async () => {
  process.env.HF_HUB_DOWNLOAD_TIMEOUT = "soon";
  try {
    await assert.rejects(resolveModel(ID, { endpoint: "http://127.0.0.1:9", cacheDir: cache, progress: false }),
      hubError(/HF_HUB_DOWNLOAD_TIMEOUT="soon" is not a positive number of seconds/));
  } finally {
    process.env.HF_HUB_DOWNLOAD_TIMEOUT = "5";
    rmSync(cache, { recursive: true, force: true });
  }
});
