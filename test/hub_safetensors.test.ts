import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CheckpointError, loadCheckpoint, readSafetensors, type RawTensor } from "../src/hub/index.js";
import { writeSafetensors } from "./helpers/mock_hub.js";
import { missing as fixtureMissing, STORIES as stories } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

const storiesFile = join(stories, "model.safetensors");

const STORIES_DTYPE: Record<string, string> = { float32: "F32" };

const f32 = (t: RawTensor) => new Float32Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.length / 4);
const sum = (a: Float32Array) => a.reduce((s, v) => s + v, 0);

function tmp(): string {
  return tempDir("tsorch-hub-");
}

/** Assert that `fn` throws a CheckpointError whose message names `file` and matches `pattern`. */
async function rejectsWith(fn: () => unknown, file: string, pattern: RegExp): Promise<void> {
  await assert.rejects(async () => fn(), (e: unknown) => {
    assert.ok(e instanceof CheckpointError, `expected CheckpointError, got ${e}`);
    assert.ok(e.message.includes(file), `message should name ${file}: ${e.message}`);
    assert.match(e.message, pattern);
    return true;
  });
}

test("reads stories260K: names, shapes, dtypes, values, views of the mapped file", (t) => {
  const skip = fixtureMissing(storiesFile);
  if (skip) return t.skip(skip);
  const tensors = readSafetensors(storiesFile);
  assert.equal(tensors.size, 47); // embed + 5 layers × 9 + final norm; lm_head is tied
  const embed = tensors.get("model.embed_tokens.weight")!;
  assert.equal(embed.name, "model.embed_tokens.weight");
  assert.equal(embed.dtype, "float32");
  assert.deepEqual(embed.shape, [512, 64]);
  assert.deepEqual(tensors.get("model.layers.0.self_attn.k_proj.weight")!.shape, [32, 64]);
  assert.deepEqual(tensors.get("model.layers.4.mlp.down_proj.weight")!.shape, [64, 172]);
  assert.deepEqual(tensors.get("model.layers.2.mlp.gate_proj.weight")!.shape, [172, 64]);
  assert.deepEqual(tensors.get("model.norm.weight")!.shape, [64]);
  assert.ok([...tensors.values()].every((x) => x.dtype === "float32"));

  // Views of the memory-mapped file, one ArrayBuffer per tensor, holding exactly the file's bytes.
  const file = readFileSync(storiesFile);
  const headerEnd = 8 + Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.toString("utf8", 8, headerEnd));
  assert.deepEqual(header.__metadata__, { format: "pt" });
  for (const x of tensors.values()) {
    const [begin, end] = header[x.name].data_offsets;
    assert.equal(x.bytes.byteLength, end - begin);
    assert.equal(x.bytes.buffer.byteLength, end - begin, "one ArrayBuffer per tensor");
    assert.ok(file.subarray(headerEnd + begin, headerEnd + end).equals(x.bytes), x.name);
    assert.equal(STORIES_DTYPE[x.dtype], header[x.name].dtype);
  }

  // Reference values from Python: safetensors.numpy.load_file(model.safetensors) in the venv of
  // ../shared/tools/reference-venv.sh; float(x) of each float32 (exact), sums in float64.
  const e = f32(embed);
  assert.deepEqual([...e.subarray(0, 3)], [-0.29474878311157227, 0.5618956089019775, 0.1754225343465805]);
  assert.equal(e[511 * 64 + 63], -0.424032598733902);
  assert.ok(Math.abs(sum(e) - -752.3677446640068) < 1e-9);
  assert.deepEqual([...f32(tensors.get("model.norm.weight")!).subarray(0, 3)], [2.4583089351654053, 1.3673226833343506, 1.7504382133483887]);
  const q = f32(tensors.get("model.layers.4.self_attn.q_proj.weight")!);
  assert.deepEqual([...q.subarray(63 * 64, 63 * 64 + 2)], [0.10651404410600662, -0.05055488646030426]);
  assert.ok(Math.abs(sum(q) - 2.187665213362834) < 1e-9);
});

test("maps every supported dtype and skips __metadata__", () => {
  const dir = tmp();
  const file = join(dir, "dtypes.safetensors");
  const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 255);
  const spec = [
    { name: "a", dtype: "F32", shape: [2, 3], bytes: bytes(24, 1) },
    { name: "b", dtype: "F16", shape: [3], bytes: bytes(6, 2) },
    { name: "c", dtype: "BF16", shape: [1, 2], bytes: bytes(4, 3) },
    { name: "d", dtype: "I32", shape: [], bytes: bytes(4, 4) },
    { name: "e", dtype: "I64", shape: [2], bytes: bytes(16, 5) },
    { name: "f", dtype: "BOOL", shape: [5], bytes: Uint8Array.from([1, 0, 1, 1, 0]) },
    { name: "g", dtype: "F32", shape: [0, 4], bytes: new Uint8Array(0) },
  ];
  writeSafetensors(file, spec, { format: "pt" });
  const tensors = readSafetensors(file);
  assert.deepEqual([...tensors.keys()], ["a", "b", "c", "d", "e", "f", "g"]);
  const expected = ["float32", "float16", "bfloat16", "int32", "int64", "bool", "float32"];
  spec.forEach((s, i) => {
    const t = tensors.get(s.name)!;
    assert.equal(t.dtype, expected[i]);
    assert.deepEqual(t.shape, s.shape);
    assert.deepEqual(t.bytes, s.bytes);
  });
  rmSync(dir, { recursive: true });
});

test("corrupt files throw one-line CheckpointErrors naming the file", async (t) => {
  const dir = tmp();
  const at = (name: string, data: Uint8Array | string) => {
    const file = join(dir, name);
    writeFileSync(file, data);
    return file;
  };
  const withHeader = (name: string, header: unknown, dataBytes: number) => {
    const json = Buffer.from(JSON.stringify(header));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    return at(name, Buffer.concat([len, json, Buffer.alloc(dataBytes)]));
  };

  const short = at("short.safetensors", Buffer.from([1, 2, 3, 4]));
  await rejectsWith(() => readSafetensors(short), short, /4 bytes, shorter than the 8-byte header length/);

  const len = Buffer.alloc(16);
  len.writeBigUInt64LE(1_000_000n);
  const long = at("long.safetensors", len);
  await rejectsWith(() => readSafetensors(long), long, /header length 1000000 goes beyond the end of the file \(16 bytes\)/);

  const notJsonHeader = Buffer.concat([Buffer.from([5, 0, 0, 0, 0, 0, 0, 0]), Buffer.from("{oops")]);
  const notJson = at("notjson.safetensors", notJsonHeader);
  await rejectsWith(() => readSafetensors(notJson), notJson, /header is not valid JSON/);

  const badDtype = withHeader("dtype.safetensors", { x: { dtype: "F99", shape: [1], data_offsets: [0, 4] } }, 4);
  await rejectsWith(() => readSafetensors(badDtype), badDtype, /tensor "x" has unknown dtype "F99" \(the format's dtypes: BOOL, F4, /);
  // A dtype of the format that tsorch does not load (F8_E5M2; F8_E4M3 loads for FP8 checkpoints): refused by name.
  const fp8 = withHeader("fp8.safetensors", { x: { dtype: "F8_E5M2", shape: [4], data_offsets: [0, 4] } }, 4);
  await rejectsWith(() => readSafetensors(fp8), fp8, /tensor "x" has unsupported dtype "F8_E5M2" \(supported: F32, F16, BF16, I32, I64, BOOL, U8, F8_E4M3\)/);

  const reversed = withHeader("reversed.safetensors", { x: { dtype: "F32", shape: [1], data_offsets: [8, 4] } }, 8);
  await rejectsWith(() => readSafetensors(reversed), reversed, /tensor "x" has invalid data_offsets \[8, 4\] \(end before begin\)/);

  const badShape = withHeader("shape.safetensors", { x: { dtype: "F32", shape: [-1], data_offsets: [0, 4] } }, 4);
  await rejectsWith(() => readSafetensors(badShape), badShape, /tensor "x" has an invalid shape \[-1\]/);

  const mismatch = withHeader("mismatch.safetensors", { x: { dtype: "F32", shape: [2, 3], data_offsets: [0, 20] } }, 20);
  await rejectsWith(() => readSafetensors(mismatch), mismatch,
    /tensor "x": data_offsets \[0, 20\] hold 20 bytes but shape \[2, 3\] of F32 needs 24/);

  const beyond = withHeader("beyond.safetensors", { x: { dtype: "F32", shape: [2], data_offsets: [0, 8] } }, 4);
  await rejectsWith(() => readSafetensors(beyond), beyond, /truncated data: tensor "x" ends at byte 8 of the data section but only 4 bytes follow the header/);

  const skipStories = fixtureMissing(storiesFile);
  if (!skipStories) {
    const full = readFileSync(storiesFile);
    const cut = at("cut.safetensors", full.subarray(0, full.length - 100));
    await rejectsWith(() => readSafetensors(cut), cut, /truncated data: tensor "model\.norm\.weight"/);
    const cutHeader = at("cuthead.safetensors", full.subarray(0, 100));
    await rejectsWith(() => readSafetensors(cutHeader), cutHeader, /header length 4856 goes beyond the end of the file/);
  } else {
    t.diagnostic(`${skipStories}: skipped the cut-short stories260K cases`);
  }

  const missing = join(dir, "missing.safetensors");
  await rejectsWith(() => readSafetensors(missing), missing, /cannot open .*ENOENT/);
  rmSync(dir, { recursive: true });
});

test("sharded checkpoint loads equal to the single file", async (t) => {
  const skip = fixtureMissing(storiesFile);
  if (skip) return t.skip(skip);
  const single = await loadCheckpoint(stories);
  const dir = tmp();
  const names = [...single.keys()];
  const half = Math.ceil(names.length / 2);
  const shards = [names.slice(0, half), names.slice(half)];
  const weightMap: Record<string, string> = {};
  shards.forEach((shardNames, i) => {
    const shard = `model-0000${i + 1}-of-00002.safetensors`;
    writeSafetensors(join(dir, shard), shardNames.map((n) => {
      const x = single.get(n)!;
      return { name: n, dtype: STORIES_DTYPE[x.dtype], shape: x.shape, bytes: x.bytes };
    }));
    for (const n of shardNames) weightMap[n] = shard;
  });
  // Reverse the weight_map order: the result follows the index, not the shard files.
  const reversed = Object.fromEntries(Object.entries(weightMap).reverse());
  writeFileSync(join(dir, "model.safetensors.index.json"), JSON.stringify({ metadata: { total_size: 1 }, weight_map: reversed }));

  const sharded = await loadCheckpoint(dir);
  assert.deepEqual([...sharded.keys()], [...names].reverse());
  for (const [name, x] of single) {
    const y = sharded.get(name)!;
    assert.equal(y.name, name);
    assert.equal(y.dtype, x.dtype);
    assert.deepEqual(y.shape, x.shape);
    assert.deepEqual(y.bytes, x.bytes);
  }

  const index = join(dir, "model.safetensors.index.json");
  writeFileSync(index, JSON.stringify({ weight_map: { ...weightMap, "extra.weight": "model-00001-of-00002.safetensors" } }));
  await rejectsWith(() => loadCheckpoint(dir), index,
    /tensor "extra.weight" is assigned to model-00001-of-00002.safetensors, which does not contain it/);

  writeFileSync(index, JSON.stringify({ weight_map: [] }));
  await rejectsWith(() => loadCheckpoint(dir), index, /"weight_map" must be an object/);

  writeFileSync(index, "{ not json");
  await rejectsWith(() => loadCheckpoint(dir), index, /is not valid JSON/);

  writeFileSync(index, JSON.stringify({ weight_map: weightMap }));
  rmSync(join(dir, "model-00002-of-00002.safetensors"));
  await rejectsWith(() => loadCheckpoint(dir), index, /missing shard file .*model-00002-of-00002\.safetensors/);
  rmSync(dir, { recursive: true });
});

test("a folder without safetensors says what was looked for", async (t) => {
  const dir = tmp();
  mkdirSync(join(dir, "empty"));
  const empty = join(dir, "empty");
  await rejectsWith(() => loadCheckpoint(empty), empty,
    /no safetensors checkpoint in .*: looked for model\.safetensors and model\.safetensors\.index\.json/);
  const skipStories = fixtureMissing(storiesFile);
  if (!skipStories) {
    copyFileSync(storiesFile, join(empty, "model.safetensors"));
    assert.equal((await loadCheckpoint(empty)).size, 47);
  } else {
    t.diagnostic(`${skipStories}: skipped loading a copy of stories260K`);
  }
  rmSync(dir, { recursive: true });
});
