/**
 * Host memory of the cpu device (devices/cpu/host_memory.ts): buffers from 2 MB on are zeroed,
 * sit on transparent huge pages where Linux has them on, pool like plain allocations and are
 * unmapped when collected; checkpoints loaded for cpu models are read into such buffers rather than
 * mapped (hub/safetensors.ts loadCheckpoint, `readWeights`).
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { allocateHost } from "../src/devices/cpu/host_memory.js";
import { loadCheckpoint } from "../src/hub/index.js";
import * as T from "../src/index.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { writeSafetensors } from "./helpers/mock_hub.js";
import { missing, STORIES } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

const MiB = 1024 * 1024;
const linux = process.platform === "linux";

test("large allocations are whole zeroed buffers of exactly their size, and are pooled", () => {
  for (const n of [2 * MiB, 3 * MiB + 5, 17 * MiB]) {
    const b = allocateHost(n);
    assert.equal(b.byteLength, n);
    assert.equal(b.buffer.byteLength, n);
    assert.ok(b.every((x) => x === 0), "zero-filled");
  }
  const dev = T.getDevice("cpu");
  const s = dev.allocate(5 * MiB);
  dev.release!(s);
  assert.equal(dev.allocate(5 * MiB).handle, s.handle, "a released 5 MiB buffer is handed out again");
});

const thp = "/sys/kernel/mm/transparent_hugepage/enabled";
const thpOff = !linux || !existsSync(thp) || readFileSync(thp, "utf8").includes("[never]");
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
/** Collect garbage until `done()` or give up; finalizers of external buffers run on a later tick. */
async function collectUntil(done: () => boolean, tries = 50): Promise<boolean> {
  for (let i = 0; i < tries && !done(); i++) {
    gc();
    await new Promise((r) => setTimeout(r, 10));
  }
  return done();
}
const mappedFiles = () => readFileSync("/proc/self/maps", "utf8").split("\n");
const anonHuge = () => Number(/AnonHugePages:\s+(\d+) kB/.exec(readFileSync("/proc/self/smaps_rollup", "utf8"))![1]) * 1024;

test("written large allocations are backed by 2 MB pages, and given back when collected", { skip: thpOff && "transparent huge pages are off (or not Linux)" }, async () => {
  const before = anonHuge();
  let b: Uint8Array | undefined = allocateHost(16 * MiB + 12345);
  b.fill(1);
  const gained = anonHuge() - before;
  assert.ok(gained >= 16 * MiB, `16 MiB written, ${gained / MiB} MiB of it on huge pages`);
  b = undefined;
  assert.ok(await collectUntil(() => anonHuge() <= before + 2 * MiB), "unmapped once no view is reachable");
});

test("loadCheckpoint with readWeights reads tensors into host memory (not a file mapping), once, with the file's values", () => {
  const dir = tempDir("tsorch-host-");
  const big = Float32Array.from({ length: MiB }, (_, i) => (i % 977) * 0.25);
  const small = Float32Array.from({ length: 8 }, (_, i) => -i);
  writeSafetensors(join(dir, "model.safetensors"), [
    { name: "small", dtype: "F32", shape: [8], bytes: new Uint8Array(small.buffer) },
    { name: "big", dtype: "F32", shape: [1024, 1024], bytes: new Uint8Array(big.buffer) },
  ]);
  return loadCheckpoint(dir, undefined, undefined, { readWeights: true }).then((ckpt) => {
    const t = ckpt.get("big")!;
    assert.equal(t.bytes, t.bytes, "read once: the same buffer on every access");
    assert.ok(!linux || !mappedFiles().some((l) => l.includes(dir)), "the file is not mapped");
    assert.deepEqual(new Float32Array(t.bytes.buffer, t.bytes.byteOffset, MiB), big);
    const s = ckpt.get("small")!.bytes;
    assert.deepEqual(new Float32Array(s.buffer, s.byteOffset, 8), small);
    rmSync(dir, { recursive: true });
  });
});

test("a model loaded on cpu as stored reads its checkpoint instead of mapping it", { skip: (!linux && "needs /proc/self/maps") || missing(STORIES) }, async () => {
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  assert.ok(model.config, "loaded");
  assert.ok(!mappedFiles().some((l) => l.includes(STORIES)), "the checkpoint file is not mapped");
});

test("writeSync overwrites a cpu storage's bytes in place (a tensor on it reads them); bytes that do not fit throw", async () => {
  const t = T.tensor(Int32Array.from([1, 2, 3, 4]), { dtype: "int32" });
  const dev = t.device;
  dev.writeSync!(t.storage, 4, new Uint8Array(Int32Array.from([20, 30]).buffer));
  assert.deepEqual(Array.from(await t.data(), Number), [1, 20, 30, 4]);
  assert.throws(() => dev.writeSync!(t.storage, 12, new Uint8Array(8)), /writeSync: 8 bytes at offset 12 do not fit a storage of 16 bytes/);
  assert.throws(() => dev.writeSync!(t.storage, -4, new Uint8Array(4)), RangeError);
});
