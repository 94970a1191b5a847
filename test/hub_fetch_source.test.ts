/**
 * The browser's model source (src/hub/fetch_source.ts) run in Node against a local HTTP server:
 * sharded checkpoints give the same tensors as the file-system loader, progress is reported, a
 * second load with a cache makes no request, and missing files are named. (The real browser, with
 * its Cache API, is test/browser.test.ts.)
 */
import assert from "node:assert/strict";
import { copyFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { startServer, type DemoServer } from "../examples/browser/server.js";
import { fetchSource, modelBaseUrl } from "../src/hub/fetch_source.js";
import { readSafetensors, type RawTensor } from "../src/hub/index.js";
import type { DownloadProgress } from "../src/hub/source.js";
import { missing, TINY } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

const TINY_LLAMA = path.join(TINY, "llama");
const skip = missing(TINY_LLAMA);
let server: DemoServer | undefined;
let reference: Map<string, RawTensor>;

/** A .safetensors file of `tensors` (header padded to 8 bytes, as the Python writer does). */
function safetensorsBytes(tensors: RawTensor[]): Uint8Array {
  const codes: Record<string, string> = { float32: "F32", float16: "F16", bfloat16: "BF16", int32: "I32", int64: "I64", bool: "BOOL" };
  let offset = 0;
  const header: Record<string, unknown> = {};
  for (const t of tensors) {
    header[t.name] = { dtype: codes[t.dtype], shape: t.shape, data_offsets: [offset, offset + t.bytes.byteLength] };
    offset += t.bytes.byteLength;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(new TextEncoder().encode(json), 8);
  let at = 8 + json.length;
  for (const t of tensors) {
    out.set(t.bytes, at);
    at += t.bytes.byteLength;
  }
  return out;
}

before(async () => {
  if (skip) return;
  reference = readSafetensors(path.join(TINY_LLAMA, "model.safetensors"));
  // The tiny Llama split in two shards, listed by an index in reverse tensor order.
  const sharded = tempDir("tsorch-sharded-");
  const names = [...reference.keys()];
  const half = Math.ceil(names.length / 2);
  const shards = { "model-00001-of-00002.safetensors": names.slice(0, half), "model-00002-of-00002.safetensors": names.slice(half) };
  const weightMap: Record<string, string> = {};
  for (const [file, part] of Object.entries(shards)) {
    writeFileSync(path.join(sharded, file), safetensorsBytes(part.map((n) => reference.get(n)!)));
    part.forEach((n) => (weightMap[n] = file));
  }
  const reversed = Object.fromEntries(Object.entries(weightMap).reverse());
  writeFileSync(path.join(sharded, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: reversed }));
  copyFileSync(path.join(TINY_LLAMA, "config.json"), path.join(sharded, "config.json"));
  // A folder whose index names a shard that is not there.
  const broken = tempDir("tsorch-broken-");
  writeFileSync(path.join(broken, "model.safetensors.index.json"), JSON.stringify({ weight_map: { "a.weight": "gone.safetensors" } }));
  server = await startServer({
    port: 0, files: {}, scripts: {},
    folders: { "/single/": TINY_LLAMA, "/sharded/": sharded, "/broken/": broken, "/empty/": tempDir("tsorch-empty-") },
  });
});

after(async () => {
  await server?.close();
  delete (globalThis as { caches?: unknown }).caches;
});

function assertSameTensors(got: Map<string, RawTensor>, order: string[]): void {
  assert.deepEqual([...got.keys()], order);
  for (const [name, t] of got) {
    const want = reference.get(name)!;
    assert.equal(t.dtype, want.dtype, name);
    assert.deepEqual(t.shape, want.shape, name);
    assert.deepEqual(t.bytes, want.bytes, name);
  }
}

test("a sharded checkpoint over HTTP gives the file loader's tensors, in weight_map order, with progress", { skip }, async () => {
  const progress: DownloadProgress[] = [];
  const base = await fetchSource.resolve(`${server!.url}sharded`, {});
  assert.equal(base, `${server!.url}sharded/`);
  const tensors = await fetchSource.loadCheckpoint(base, { onProgress: (p) => progress.push(p) });
  assertSameTensors(tensors, [...reference.keys()].reverse());
  const last = progress.filter((p) => p.file === "model-00002-of-00002.safetensors").at(-1)!;
  assert.ok(last.total !== undefined && last.loaded === last.total, JSON.stringify(last));
  assertSameTensors(await fetchSource.loadCheckpoint(`${server!.url}single/`), [...reference.keys()]);
});

test("missing files are named: a shard listed by the index, or no checkpoint at all", { skip }, async () => {
  await assert.rejects(fetchSource.loadCheckpoint(`${server!.url}broken/`), /index\.json: missing shard file .*\/broken\/gone\.safetensors/);
  await assert.rejects(fetchSource.loadCheckpoint(`${server!.url}empty/`), /no safetensors checkpoint at .*\/empty\/: model\.safetensors and model\.safetensors\.index\.json both answered 404/);
  assert.equal(await fetchSource.readText(`${server!.url}empty/`, "config.json"), undefined);
});

test("with a Cache API, a second load of the weights makes no request", { skip }, async () => {
  // A minimal CacheStorage (Node has none): enough for fetch_source's match / put.
  const stored = new Map<string, Response>();
  (globalThis as { caches?: unknown }).caches = {
    open: async () => ({
      match: async (url: string) => stored.get(url)?.clone(),
      put: async (url: string, response: Response) => void stored.set(url, response),
    }),
  };
  const weights = "/single/model.safetensors";
  const count = () => server!.requests.filter((p) => p === weights).length;
  const before = count();
  assertSameTensors(await fetchSource.loadCheckpoint(`${server!.url}single/`), [...reference.keys()]);
  assertSameTensors(await fetchSource.loadCheckpoint(`${server!.url}single/`), [...reference.keys()]);
  assert.equal(count(), before + 1);
});

test("model names: URL bases, relative URLs against the page, Hub ids; anything else is refused", () => {
  assert.equal(modelBaseUrl("Org/model-1", "http://x/"), "https://huggingface.co/Org/model-1/resolve/main/");
  assert.equal(modelBaseUrl("Org/model-1", "http://x/", "v1.0"), "https://huggingface.co/Org/model-1/resolve/v1.0/");
  assert.equal(modelBaseUrl("/models/a", "http://h:1/demo/index.html"), "http://h:1/models/a/");
  assert.equal(modelBaseUrl("./models/a/", "http://h:1/demo/index.html"), "http://h:1/demo/models/a/");
  assert.equal(modelBaseUrl("https://cdn.example/m", "http://x/"), "https://cdn.example/m/");
  assert.throws(() => modelBaseUrl("stories", "http://x/"), /invalid model "stories": expected a URL .* or a Hugging Face Hub id/);
});
