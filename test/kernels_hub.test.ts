/**
 * Kernel repositories through the (mock) Hub and the Hugging Face cache: version branches, cache
 * hits without requests, kernels.lock pins and hash checks, and the sandbox rule.
 */
import assert from "node:assert/strict";
import { cpSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";
import * as T from "../src/index.js";
import { getKernel, lockEntry } from "../src/kernels/index.js";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fixtureExpected } from "./helpers/fixture_checks.js";
import { CLI, missing, ROOT, TINY } from "./helpers/shared.js";
import { startMockHub, type MockHub } from "./helpers/mock_hub.js";
import { tempDir } from "./helpers/temp_dir.js";

const tmp = tempDir("tsorch-kernels-");
const cacheDir = path.join(tmp, "cache");
let hub: MockHub;
let copies = 0;

/** A copy of hub-kernels/<name> with its metadata's version set to `version`, plus extra files. */
function variantCopy(name: string, version: number, extra: Record<string, string> = {}): string {
  const dir = path.join(tmp, `${name}-${++copies}`);
  cpSync(path.join(ROOT, "hub-kernels", name), dir, { recursive: true });
  for (const v of ["webgpu-wgsl", "cpu-wasm"]) {
    const f = path.join(dir, "build", v, "metadata.json");
    writeFileSync(f, JSON.stringify({ ...JSON.parse(readFileSync(f, "utf8")), version }));
  }
  for (const [f, text] of Object.entries(extra)) writeFileSync(path.join(dir, f), text);
  return dir;
}

before(async () => {
  const v1 = variantCopy("rmsnorm", 1), v2 = variantCopy("rmsnorm", 2);
  const native = variantCopy("rmsnorm", 1, { "build/cpu-wasm/librmsnorm.so": "\x7fELF" });
  const cuda = variantCopy("rmsnorm", 1);
  cpSync(path.join(cuda, "build", "cpu-wasm"), path.join(cuda, "build", "torch28-cxx11-cu128-x86_64-linux"), { recursive: true });
  hub = await startMockHub({
    "org/rmsnorm": { branches: { main: v2, v1, v2 } },
    "org/native": { branches: { main: native } },
    "org/cuda": { branches: { main: cuda } },
  });
});
after(async () => {
  await hub.close();
  rmSync(tmp, { recursive: true, force: true });
});

const opts = () => ({ cacheDir, endpoint: hub.url });

test("version branches resolve to their commits; a second load makes no request", async () => {
  const k1 = await getKernel("org/rmsnorm", { ...opts(), version: 1 });
  const k2 = await getKernel("org/rmsnorm", { ...opts(), version: 2 });
  assert.equal(k1.version, 1);
  assert.equal(k2.version, 2);
  assert.equal(k1.commit, hub.commit("org/rmsnorm", "v1"));
  assert.equal(k2.commit, hub.commit("org/rmsnorm", "v2"));
  assert.match(k1.dir, /models--org--rmsnorm[\\/]snapshots[\\/][0-9a-f]{40}$/);
  const byRevision = await getKernel("org/rmsnorm", { ...opts(), revision: hub.commit("org/rmsnorm", "v1") });
  assert.equal(byRevision.version, 1);
  const n = hub.requests.length;
  const again = await getKernel("org/rmsnorm", { ...opts(), version: 1 });
  assert.equal(hub.requests.length, n, "a cached kernel loads without requests");
  const x = T.tensor([[1, 2, 3, 4]]), w = T.tensor([1, 1, 1, 1]);
  assert.ok(Math.abs(((await again.rmsNorm(x, w, 0).data()) as Float32Array)[3] - 4 / Math.sqrt(7.5)) < 1e-6);
  await assert.rejects(getKernel("org/rmsnorm", { ...opts(), version: 3 }), /kernel org\/rmsnorm \(version 3\) not found on the Hub/);
});

test("kernels.lock: the pinned revision loads; a tampered file refuses to load", async () => {
  const k = await getKernel("org/rmsnorm", { ...opts(), version: 1 });
  const lock = { "org/rmsnorm": lockEntry(k.dir, k.commit!, 1) };
  assert.equal((await getKernel("org/rmsnorm", { ...opts(), lock })).version, 1, "the lock's revision wins over main (v2)");
  const wat = path.join(k.dir, "build", "cpu-wasm", "rmsnorm.wat");
  writeFileSync(realpathSync(wat), readFileSync(wat, "utf8") + ";; changed\n");
  await assert.rejects(getKernel("org/rmsnorm", { ...opts(), lock }),
    /kernel org\/rmsnorm: file build\/cpu-wasm\/rmsnorm.wat does not match kernels.lock \(sha256 [0-9a-f]{64}, locked [0-9a-f]{64}\); refusing to load/);
});

test("the sandbox rule: native code and non-WGSL/WASM variants are refused", async () => {
  await assert.rejects(getKernel("org/native", opts()),
    /kernel org\/native ships native code \(build\/cpu-wasm\/librmsnorm.so\); tsorch loads only WGSL and WebAssembly kernels/);
  await assert.rejects(getKernel("org/cuda", opts()),
    /kernel org\/cuda has build variant torch28-cxx11-cu128-x86_64-linux; tsorch loads only webgpu-wgsl, cpu-wasm/);
});

test("tsorch kernels lock / download: pins revision and file hashes; download fills an empty cache", async () => {
  const run = promisify(execFile);
  const env = (cache: string) => ({ ...process.env, HF_ENDPOINT: hub.url, HF_HUB_CACHE: path.join(tmp, cache) });
  const file = path.join(tmp, "kernels.lock");
  const out = await run(process.execPath, [CLI, "kernels", "lock", "org/rmsnorm@1", "--file", file], { env: env("cli-cache") });
  assert.match(out.stdout, new RegExp(`org/rmsnorm: ${hub.commit("org/rmsnorm", "v1")} \\(version 1, 6 files\\)`));
  const lock = JSON.parse(readFileSync(file, "utf8"));
  assert.equal(lock["org/rmsnorm"].revision, hub.commit("org/rmsnorm", "v1"));
  assert.match(lock["org/rmsnorm"].files["build/cpu-wasm/rmsnorm.wasm"], /^[0-9a-f]{64}$/);
  const n = hub.requests.length;
  const dl = await run(process.execPath, [CLI, "kernels", "download", "--file", file], { env: env("cli-cache-2") });
  assert.match(dl.stdout, /org\/rmsnorm: [0-9a-f]{40} -> .*cli-cache-2/);
  assert.ok(hub.requests.length > n);
  const k = await getKernel("org/rmsnorm", { cacheDir: path.join(tmp, "cli-cache-2"), lock: file });
  assert.equal(k.version, 1);
});

test("tsorch generate --kernel MoE=DIR (repeatable) gives transformers' greedy ids", async (t) => {
  const dir = path.join(TINY, "qwen3_moe");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const e = fixtureExpected("qwen3_moe");
  const k = (name: string) => path.join(ROOT, "hub-kernels", name);
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, "generate", "--model", dir, "--input-ids", e.input_ids[0].join(","),
    "--max-new-tokens", String(e.greedy.max_new_tokens), "--output", "json", "--kernel", `MoE=${k("moe-grouped-gemm")}@1`, "--kernel", `RMSNorm=${k("rmsnorm")}`]);
  assert.deepEqual(JSON.parse(stdout).new_token_ids, e.greedy.single[0]);
  assert.equal(stderr, `kernelized on cpu: MoE x2 <- ${k("moe-grouped-gemm")}@v1, RMSNorm x9 <- ${k("rmsnorm")}\n`);
});

test("a local kernel folder: a version must equal its metadata's, a revision is refused", async () => {
  const dir = path.join(ROOT, "hub-kernels", "rmsnorm");
  assert.equal((await getKernel(dir, { version: 1 })).version, 1);
  await assert.rejects(getKernel(dir, { version: 2 }), /kernel folder .*rmsnorm holds version 1 \(its metadata.json\), not the version 2 asked for/);
  await assert.rejects(getKernel(dir, { revision: "abc123" }), /kernel .*rmsnorm is a local folder: a revision \(abc123\) applies to Hub repositories only/);
});
