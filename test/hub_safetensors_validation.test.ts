/**
 * safetensors validation against the safetensors library itself: test/data/safetensors_validation.json
 * holds files (hand-made, one per rule, and seeded random mutations of valid files) with the
 * library's verdict on each (test/data/safetensors_validation.py). tsorch must load exactly the
 * files the library loads — with the same tensors and bytes — and reject the others with a
 * one-line CheckpointError naming the file, both memory-mapped and reading tensor by tensor.
 * Also: unaligned tensors come out aligned, and a sparse file over 4 GiB reads past 4 GiB.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { closeSync, openSync, readFileSync, rmSync, writeFileSync, writeSync, ftruncateSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { native } from "../src/devices/cpu/native.js";
import { CheckpointError, readSafetensors, type RawTensor } from "../src/hub/index.js";
import { tempDir } from "./helpers/temp_dir.js";

const root = fileURLToPath(new URL("../..", import.meta.url)); // dist/test/x.js → project root
const cases = JSON.parse(readFileSync(join(root, "test/data/safetensors_validation.json"), "utf8")) as {
  case: string; file: string; ok: boolean; error?: string; tensors?: [string, string, number[], [number, number]][];
}[];
const LOADABLE: Record<string, string> = { F32: "float32", F16: "float16", BF16: "bfloat16", I32: "int32", I64: "int64", BOOL: "bool", U8: "uint8" };

function tmp(): string {
  return tempDir("tsorch-st-validate-");
}

/** The outcome of reading `file`: the tensors, or the CheckpointError (anything else fails the test). */
function outcome(file: string, map: boolean) {
  try {
    return { tensors: readSafetensors(file, { map }) };
  } catch (e) {
    assert.ok(e instanceof CheckpointError, `${file}: expected a CheckpointError, got ${(e as Error)?.stack ?? e}`);
    assert.ok(e.message.startsWith(`${file}: `) || e.message.includes(file), `message should name the file: ${e.message}`);
    assert.ok(!/[\r\n]/.test(e.message), `message should be one line: ${JSON.stringify(e.message)}`);
    return { error: e.message };
  }
}

for (const map of [true, false]) {
  test(`loads exactly what the safetensors library loads (${map ? "memory-mapped" : "read per tensor"})`, () => {
    const dir = tmp();
    let loaded = 0;
    cases.forEach((c, i) => {
      const file = join(dir, `case${i}.safetensors`);
      const bytes = Buffer.from(c.file, "base64");
      writeFileSync(file, bytes);
      const got = outcome(file, map);
      if (!c.ok) {
        assert.ok(got.error, `${c.case}: the library rejects it (${c.error}) but tsorch loaded it`);
        return;
      }
      const unloadable = c.tensors!.find(([, dtype]) => !LOADABLE[dtype]);
      if (unloadable) {
        assert.match(got.error ?? "", new RegExp(`tensor "${unloadable[0]}" has unsupported dtype "${unloadable[1]}"`), c.case);
        return;
      }
      assert.ok(got.tensors, `${c.case}: the library loads it but tsorch says: ${got.error}`);
      const dataStart = 8 + Number(bytes.readBigUInt64LE(0));
      // Header order; the library's list is sorted by name.
      assert.deepEqual([...got.tensors.keys()].sort(), c.tensors!.map(([name]) => name).sort(), c.case);
      for (const [name, dtype, shape, [begin, end]] of c.tensors!) {
        const t: RawTensor = got.tensors.get(name)!;
        assert.equal(t.dtype, LOADABLE[dtype], `${c.case}: ${name}`);
        assert.deepEqual(t.shape, shape, `${c.case}: ${name}`);
        assert.ok(bytes.subarray(dataStart + begin, dataStart + end).equals(t.bytes), `${c.case}: bytes of ${name}`);
      }
      loaded++;
    });
    assert.ok(loaded >= 5, `only ${loaded} cases loaded: the reference file lost its valid cases`);
    rmSync(dir, { recursive: true });
  });
}

test("unaligned tensors (valid per the format) come out aligned for the kernels", () => {
  const c = cases.find((x) => x.case === "valid, unaligned (unpadded header)")!;
  const bytes = Buffer.from(c.file, "base64");
  const dataStart = 8 + Number(bytes.readBigUInt64LE(0));
  const [, , , [begin]] = c.tensors!.find(([name]) => name === "x")!;
  assert.notEqual((dataStart + begin) % 4, 0, "the reference file stores x unaligned");
  const dir = tmp();
  const file = join(dir, "unaligned.safetensors");
  writeFileSync(file, bytes);
  for (const map of [true, false]) {
    const x = readSafetensors(file, { map }).get("x")!;
    const expected = [0, 1].map((i) => bytes.readFloatLE(dataStart + begin + 4 * i));
    const out = new Float32Array(2);
    // The copy kernel checks that its source is aligned to the element size (napi_args.cc).
    native().copy(x.bytes, 0, [1], out, 0, [1], [2]);
    assert.deepEqual([...out], expected);
  }
  rmSync(dir, { recursive: true });
});

test("rules are named: overlap, hole, trailing bytes, metadata", () => {
  const dir = tmp();
  const expect: Record<string, RegExp> = {
    overlap: /tensor "y": data_offsets \[4, 12\] overlap tensor "x", which ends at 8/,
    hole: /tensor "y": data_offsets \[12, 20\] leave a hole: bytes \[8, 12\) of the data section belong to no tensor/,
    "trailing bytes": /the tensors cover 16 bytes but 17 bytes follow the header/,
    "truncated data": /truncated data: tensor "y" ends at byte 16 of the data section but only 15 bytes follow the header/,
    "metadata not strings": /"__metadata__" must map strings to strings/,
    "header length over 100 MB": /header length 100000001 exceeds the format's limit of 100000000 bytes/,
    "invalid UTF-8": /header is not valid UTF-8/,
    "sub-byte dtype not a whole byte": /tensor "x": shape \[3\] of F4 is not a whole number of bytes/,
  };
  for (const [name, pattern] of Object.entries(expect)) {
    const c = cases.find((x) => x.case === name)!;
    const file = join(dir, `${name.replace(/\W+/g, "_")}.safetensors`);
    writeFileSync(file, Buffer.from(c.file, "base64"));
    assert.match(outcome(file, true).error ?? "(loaded)", pattern, name);
  }
  rmSync(dir, { recursive: true });
});

test("a sparse file over 4 GiB maps, and values past the 4 GiB offset read back", () => {
  // Five 1 GiB zero tensors (holes on disk) then a small F32 tensor beyond 4 GiB, plus a BF16 one.
  const GiB = 2 ** 30;
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (let i = 0; i < 5; i++) {
    header[`zeros.${i}`] = { dtype: "F32", shape: [GiB / 4], data_offsets: [offset, offset + GiB] };
    offset += GiB;
  }
  header.tail = { dtype: "F32", shape: [2, 3], data_offsets: [offset, offset + 24] };
  header.tail16 = { dtype: "BF16", shape: [3], data_offsets: [offset + 24, offset + 30] };
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((8 + json.length) % 8)) % 8);
  const dataStart = 8 + json.length;
  const tail = Float32Array.from([1.5, -2.25, 3, 1e-3, -7, 65504]);
  const tail16 = Uint16Array.from([0x3f80, 0xc000, 0x4049]); // bf16 1, -2, 3.140625
  const dir = tmp();
  const file = join(dir, "big.safetensors");
  const fd = openSync(file, "w");
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    writeSync(fd, Buffer.concat([len, Buffer.from(json)]), 0, dataStart, 0);
    ftruncateSync(fd, dataStart + offset + 30);
    writeSync(fd, new Uint8Array(tail.buffer), 0, 24, dataStart + offset);
    writeSync(fd, new Uint8Array(tail16.buffer), 0, 6, dataStart + offset + 24);
  } finally {
    closeSync(fd);
  }
  try {
    for (const map of [true, false]) {
      const tensors = readSafetensors(file, { map });
      assert.equal(tensors.size, 7);
      const t = tensors.get("tail")!;
      assert.deepEqual(t.shape, [2, 3]);
      assert.deepEqual([...new Float32Array(t.bytes.buffer, t.bytes.byteOffset, 6)], [...tail]);
      const b = tensors.get("tail16")!;
      assert.equal(b.dtype, "bfloat16");
      assert.deepEqual([...new Uint16Array(b.bytes.buffer, b.bytes.byteOffset, 3)], [...tail16]);
      if (map) {
        const z = tensors.get("zeros.4")!;
        assert.equal(z.bytes.byteLength, GiB);
        assert.equal(z.bytes[GiB - 1] + z.bytes[0], 0, "the last filler reads as zeros");
        assert.equal(z.dtype, "float32");
      }
    }
  } finally {
    rmSync(dir, { recursive: true });
  }
});
