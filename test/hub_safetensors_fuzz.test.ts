/**
 * Property-based fuzzing of the safetensors reader (fast-check): valid files with random tensors
 * (dtypes, shapes, metadata, padded or unpadded headers) are mutated — header fields, header
 * bytes, the header length, truncation, trailing bytes, spliced garbage — and every outcome must
 * be either a load whose tensors are exactly what the header describes (independent check below:
 * offsets tile the data section, sizes match, bytes equal the file's) or a one-line
 * CheckpointError naming the file. Never a crash, another error type, or garbage. Runs a fixed
 * number of small cases, memory-mapped and read per tensor (a few seconds).
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { CheckpointError, readSafetensors } from "../src/hub/index.js";
import { tempDir } from "./helpers/temp_dir.js";

const SIZES: Record<string, number> = { F32: 4, F16: 2, BF16: 2, I32: 4, I64: 8, BOOL: 1, U8: 1, F64: 8 };
const LOADABLE = new Set(["F32", "F16", "BF16", "I32", "I64", "BOOL", "U8"]);
const dir = tempDir("tsorch-st-fuzz-");
after(() => rmSync(dir, { recursive: true, force: true }));

interface Spec { name: string; dtype: string; shape: number[] }

/** A valid file: tensors back to back in header order, header padded to 8 bytes or not. */
function build(tensors: Spec[], metadata: Record<string, string> | null, pad: boolean): Buffer {
  const header: Record<string, unknown> = metadata ? { __metadata__: metadata } : {};
  let offset = 0;
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1) * SIZES[t.dtype];
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + n] };
    offset += n;
  }
  return pack(JSON.stringify(header), offset, pad);
}

function pack(json: string, dataBytes: number, pad: boolean): Buffer {
  const text = pad ? json + " ".repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8) : json;
  const raw = Buffer.from(text);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(raw.length));
  return Buffer.concat([len, raw, Buffer.from(Array.from({ length: dataBytes }, (_, i) => (i * 29 + 5) & 255))]);
}

const spec = fc.record({
  name: fc.oneof(fc.constantFrom("w", "model.layers.0.mlp.up_proj.weight", "b", "é", "a\nb"), fc.string({ maxLength: 6 })),
  dtype: fc.constantFrom(...Object.keys(SIZES)),
  shape: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 }),
});
const validFile = fc.record({
  tensors: fc.uniqueArray(spec, { maxLength: 5, selector: (t) => t.name }).map((ts) => ts.filter((t) => t.name !== "__metadata__")),
  metadata: fc.option(fc.dictionary(fc.string({ maxLength: 4 }), fc.string({ maxLength: 4 }), { maxKeys: 2 })),
  pad: fc.boolean(),
});

/** Edits of the header object. */
const value = fc.oneof(fc.integer({ min: -10, max: 70 }), fc.constantFrom(2 ** 53, -0.5, 1.5, "4", null, [], {}, true));
const headerEdit = fc.oneof(
  fc.record({ kind: fc.constant("offset" as const), which: fc.nat(), end: fc.boolean(), delta: fc.integer({ min: -9, max: 9 }) }),
  fc.record({ kind: fc.constant("field" as const), which: fc.nat(), field: fc.constantFrom("dtype", "shape", "data_offsets", "extra"), to: fc.oneof(value, fc.array(value, { maxLength: 3 }), fc.constantFrom("F32", "U8", "F99", "BF16")) }),
  fc.record({ kind: fc.constant("delete" as const), which: fc.nat(), field: fc.constantFrom("dtype", "shape", "data_offsets") }),
  fc.record({ kind: fc.constant("entry" as const), which: fc.nat(), to: value }),
  fc.record({ kind: fc.constant("metadata" as const), to: fc.oneof(value, fc.dictionary(fc.string({ maxLength: 3 }), value, { maxKeys: 2 })) }),
  fc.record({ kind: fc.constant("swap" as const), a: fc.nat(), b: fc.nat() }),
);
/** Edits of the bytes. */
const byteEdit = fc.oneof(
  fc.record({ kind: fc.constant("byte" as const), at: fc.nat(), to: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant("length" as const), to: fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.integer({ min: -9, max: 9 }).map(BigInt)) }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("append" as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 9 }) }),
  fc.record({ kind: fc.constant("splice" as const), at: fc.nat(), bytes: fc.uint8Array({ maxLength: 12 }) }),
);

type HeaderEdit = typeof headerEdit extends fc.Arbitrary<infer T> ? T : never;
type ByteEdit = typeof byteEdit extends fc.Arbitrary<infer T> ? T : never;
const HEADER_EDITS = new Set(["offset", "field", "delete", "entry", "metadata", "swap"]);

function editHeader(file: Buffer, e: HeaderEdit, pad: boolean): Buffer {
  const n = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.toString("utf8", 8, 8 + n)) as Record<string, any>;
  const names = Object.keys(header).filter((k) => k !== "__metadata__");
  const pick = (i: number) => header[names[i % names.length]];
  if (e.kind === "metadata") header.__metadata__ = e.to;
  else if (names.length === 0) return file;
  else if (e.kind === "offset") pick(e.which).data_offsets[e.end ? 1 : 0] += e.delta;
  else if (e.kind === "field") pick(e.which)[e.field] = e.to;
  else if (e.kind === "delete") delete pick(e.which)[e.field];
  else if (e.kind === "entry") header[names[e.which % names.length]] = e.to;
  else if (e.kind === "swap") [pick(e.a).data_offsets, pick(e.b).data_offsets] = [pick(e.b).data_offsets, pick(e.a).data_offsets];
  return Buffer.concat([pack(JSON.stringify(header), 0, pad), file.subarray(8 + n)]);
}

function editBytes(file: Buffer, e: ByteEdit): Buffer {
  const out = Buffer.from(file);
  if (e.kind === "byte") {
    if (out.length === 0) return out;
    out[e.at % out.length] = e.to;
    return out;
  }
  if (e.kind === "length") {
    if (out.length < 8) return out;
    const n = e.to < 0n || e.to > 9n ? e.to : BigInt(Number(file.readBigUInt64LE(0))) + e.to;
    out.writeBigUInt64LE(n < 0n ? 0n : BigInt.asUintN(64, n));
    return out;
  }
  if (e.kind === "truncate") return out.subarray(0, e.at % (out.length + 1));
  if (e.kind === "append") return Buffer.concat([out, e.bytes]);
  const at = e.at % (out.length + 1);
  return Buffer.concat([out.subarray(0, at), e.bytes, out.subarray(Math.min(out.length, at + e.bytes.length))]);
}

/**
 * The independent check of a successful load: the header (JSON) describes exactly the tensors
 * returned, their offsets tile the data section, and their bytes are the file's.
 */
function checkLoad(bytes: Buffer, tensors: ReturnType<typeof readSafetensors>): void {
  const n = Number(bytes.readBigUInt64LE(0));
  const dataStart = 8 + n;
  const header = JSON.parse(bytes.toString("utf8", 8, dataStart)) as Record<string, any>;
  const meta = header.__metadata__;
  assert.ok(meta === undefined || meta === null || Object.values(meta).every((v) => typeof v === "string"), "metadata is string → string");
  const names = Object.keys(header).filter((k) => k !== "__metadata__");
  assert.deepEqual([...tensors.keys()], names);
  const ranges: [number, number][] = [];
  for (const name of names) {
    const { dtype, shape, data_offsets: [begin, end] } = header[name];
    const t = tensors.get(name)!;
    assert.ok(LOADABLE.has(dtype), `loaded a tensor of dtype ${dtype}`);
    assert.deepEqual(t.shape, shape);
    assert.ok(shape.every((d: unknown) => Number.isInteger(d) && (d as number) >= 0));
    assert.equal(end - begin, shape.reduce((a: number, b: number) => a * b, 1) * SIZES[dtype]);
    assert.ok(bytes.subarray(dataStart + begin, dataStart + end).equals(t.bytes), `bytes of ${name}`);
    ranges.push([begin, end]);
  }
  ranges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let at = 0;
  for (const [b, e] of ranges) {
    assert.equal(b, at, "tensors tile the data section");
    at = e;
  }
  assert.equal(at, bytes.length - dataStart, "the data section ends with the last tensor");
}

let counter = 0;
/** Write `bytes`, read them, and check the outcome; returns whether it loaded. */
function readAndCheck(bytes: Buffer, map: boolean): boolean {
  const file = join(dir, `f${counter++}.safetensors`);
  writeFileSync(file, bytes);
  try {
    const tensors = readSafetensors(file, { map });
    for (const t of tensors.values()) void t.bytes.length; // fallback: every tensor actually reads
    checkLoad(bytes, tensors);
    return true;
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    assert.ok(e instanceof CheckpointError, `not a CheckpointError: ${(e as Error)?.stack ?? e}`);
    assert.ok(e.message.includes(file), `does not name the file: ${e.message}`);
    assert.ok(!/[\r\n\u2028\u2029]/.test(e.message), `not one line: ${JSON.stringify(e.message)}`);
    return false;
  } finally {
    rmSync(file);
  }
}

for (const map of [true, false]) {
  const how = map ? "memory-mapped" : "read per tensor";

  test(`fuzz: valid files load, with the bytes the header describes (${how})`, () => {
    fc.assert(fc.property(validFile, ({ tensors, metadata, pad }) => {
      const loaded = readAndCheck(build(tensors, metadata, pad), map);
      assert.equal(loaded, tensors.every((t) => LOADABLE.has(t.dtype)), "valid files with loadable dtypes load; others are refused");
    }), { numRuns: 150 });
  });

  test(`fuzz: mutated files load correctly or fail with a one-line CheckpointError (${how})`, () => {
    let loads = 0, errors = 0;
    fc.assert(fc.property(validFile, fc.array(fc.oneof(headerEdit, byteEdit), { minLength: 1, maxLength: 3 }),
      ({ tensors, metadata, pad }, edits) => {
        let bytes = build(tensors, metadata, pad);
        for (const e of edits) {
          if (HEADER_EDITS.has(e.kind)) {
            try {
              bytes = editHeader(bytes, e as HeaderEdit, pad);
            } catch {
              // An earlier byte edit broke the header's JSON: leave the file as it is.
            }
          } else {
            bytes = editBytes(bytes, e as ByteEdit);
          }
        }
        if (readAndCheck(bytes, map)) loads++;
        else errors++;
      }), { numRuns: 400 });
    assert.ok(loads > 0 && errors > 0, `both outcomes occur (${loads} loads, ${errors} errors)`);
  });
}
