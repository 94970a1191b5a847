/**
 * Memory-mapped safetensors: the mapping lives exactly as long as the views JS can reach (checked
 * in /proc/self/maps on Linux), and opening a checkpoint reads only its header (/proc/self/io).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { readSafetensors } from "../src/hub/index.js";
import { writeSafetensors } from "./helpers/mock_hub.js";
import { tempDir } from "./helpers/temp_dir.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const linux = process.platform === "linux";

/** Collect garbage until `done()` or give up; finalizers of external buffers run on a later tick. */
async function collectUntil(done: () => boolean, tries = 50): Promise<boolean> {
  for (let i = 0; i < tries && !done(); i++) {
    gc();
    await new Promise((r) => setTimeout(r, 10));
  }
  return done();
}

const mapped = (file: string) => readFileSync("/proc/self/maps", "utf8").split("\n").some((l) => l.endsWith(file));

test("the mapping outlives every view and goes when the last one is collected", { skip: !linux && "needs /proc/self/maps" }, async () => {
  const dir = tempDir("tsorch-mmap-");
  const file = join(dir, "lifetime.safetensors");
  const a = Float32Array.from({ length: 4096 }, (_, i) => i * 0.5);
  const b = Float32Array.from({ length: 16 }, (_, i) => -i);
  writeSafetensors(file, [
    { name: "a", dtype: "F32", shape: [64, 64], bytes: new Uint8Array(a.buffer) },
    { name: "b", dtype: "F32", shape: [16], bytes: new Uint8Array(b.buffer) },
  ]);
  let keep: Uint8Array | undefined = (() => {
    const tensors = readSafetensors(file);
    assert.ok(mapped(file), "readSafetensors maps the file");
    return tensors.get("b")!.bytes; // the Map and tensor "a" become garbage
  })();
  await collectUntil(() => false, 5);
  assert.ok(mapped(file), "still mapped while a view is reachable");
  assert.deepEqual([...new Float32Array(keep.buffer, keep.byteOffset, 16)], [...b], "the view still reads the file's values");
  keep = undefined;
  assert.ok(await collectUntil(() => !mapped(file)), "unmapped once no view is reachable");
  rmSync(dir, { recursive: true });
});

test("mapping reads nothing: only the header is read before bytes are used", { skip: !linux && "needs /proc/self/io" }, () => {
  const dir = tempDir("tsorch-mmap-");
  const file = join(dir, "lazy.safetensors");
  const big = new Uint8Array(8 << 20).fill(7);
  writeSafetensors(file, [{ name: "big", dtype: "BF16", shape: [4 << 20], bytes: big }]);
  const rchar = () => Number(/rchar: (\d+)/.exec(readFileSync("/proc/self/io", "utf8"))![1]);
  const before = rchar();
  const tensors = readSafetensors(file);
  const read = rchar() - before;
  assert.ok(read < 1 << 20, `read ${read} bytes to open an 8 MB checkpoint`);
  const t = tensors.get("big")!;
  assert.equal(t.bytes.byteLength, 8 << 20);
  assert.equal(t.bytes[12345] + t.bytes[(8 << 20) - 1], 14);
  rmSync(dir, { recursive: true });
});
