/**
 * The webgpu device: lazy registration, memory (uploads, reads of any byte range in the dtypes'
 * standard layout, caching allocator), eager batched dispatch, device errors at sync points,
 * moving tensors between devices, and the no-adapter error. Ops themselves are covered by the
 * conformance suite (conformance.test.ts).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { promisify } from "node:util";
import * as T from "../src/index.js";
import { adapterName, type WebGPUDevice } from "../src/devices/webgpu/device.js";
import { CLI } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { workgroupReductionsWork } from "../src/devices/webgpu/reduction_check.js";

const run = promisify(execFile);
const values = async (t: T.Tensor) => Array.from((await t.data()) as ArrayLike<number | bigint>);

test("webgpu is listed among the devices before it is opened", async () => {
  assert.ok(T.deviceTypes().includes("webgpu"));
  assert.throws(() => T.getDevice("webgpu"), /not open yet: call `await openDevice\("webgpu"\)`/);
  await assert.rejects(T.openDevice("webgpu2"), /unknown device 'webgpu2'; available: .*webgpu/);
});

test("uploads and reads return the dtype's standard little-endian bytes, at any offset", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  assert.equal(dev.name, "webgpu");
  const bytes = Uint8Array.from({ length: 37 }, (_, i) => (i * 37 + 11) & 255);
  const s = dev.upload(bytes);
  assert.deepEqual(await dev.read(s, 0, 37), bytes);
  for (const [offset, n] of [[1, 5], [3, 2], [5, 32], [36, 1], [7, 0]]) {
    assert.deepEqual(await dev.read(s, offset, n), bytes.subarray(offset, offset + n), `offset ${offset}, ${n} bytes`);
  }
  const big = T.tensor([2n ** 62n + 5n, -(2n ** 63n), -1n], { dtype: "int64" }).to("webgpu");
  assert.deepEqual(await values(big), [2n ** 62n + 5n, -(2n ** 63n), -1n]);
  const half = T.tensor([1.5, -2, 65504], { dtype: "float16" }).to("webgpu");
  assert.deepEqual(await values(half.narrow(0, 1, 2)), [-2, 65504]);
  const flags = T.tensor([true, false, true, true, false]).to("webgpu");
  assert.deepEqual(await values(flags.narrow(0, 3, 2)), [1, 0]);
});

test("tensors move between cpu and webgpu; mixing devices names both", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const x = T.tensor([[1, 2, 3], [4, 5, 6]]);
  const g = x.to("webgpu");
  assert.equal(g.device, dev);
  assert.throws(() => g.to("cpu"), /await tensor.toAsync\("cpu"\)/);
  const back = await T.add(g, 1).toAsync("cpu");
  assert.equal(back.device.name, "cpu");
  assert.deepEqual(await back.tolist(), [[2, 3, 4], [5, 6, 7]]);
  assert.throws(() => T.add(x, g), /expected all tensors to be on the same device, but found at least two devices, cpu and webgpu/);
  assert.equal(await T.sum(g).item(), 21);
});

test("many eager ops are batched into few submits and read back once", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  let y = T.zeros([4], { device: "webgpu" });
  for (let i = 0; i < 1200; i++) y = T.add(y, 1);
  assert.deepEqual(await values(y), [1200, 1200, 1200, 1200]);
  await dev.synchronize();
});

test("released buffers are reused after the next submit", async (t) => {
  const dev = (await webgpuOrSkip(t)) as WebGPUDevice | undefined;
  if (!dev) return;
  // A size class no other test allocates, so the garbage collector frees nothing into it meanwhile.
  const a = dev.allocate(123457);
  const buffer = a.handle;
  dev.release(a);
  await dev.synchronize();
  const b = dev.allocate(123457);
  assert.equal(b.handle, buffer);
  assert.ok(b.nbytes === 123457 && (b.handle as GPUBuffer).size >= 123457);
});

test("an embedding id out of range raises RangeError at the next read", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const table = T.ones([4, 2], { device: "webgpu" });
  const out = T.embedding(T.tensor([1n, 7n]).to("webgpu"), table);
  await assert.rejects(out.data(), (e: Error) => e instanceof RangeError && /index 7 is out of range for a table of 4 rows/.test(e.message));
  assert.deepEqual(await values(T.embedding(T.tensor([3n]).to("webgpu"), table)), [1, 1]);
});

test("without an adapter, opening webgpu says why and what to install", { skip: process.platform !== "linux" }, async () => {
  const env = { ...process.env, VK_ICD_FILENAMES: "/nonexistent.json", __EGL_VENDOR_LIBRARY_FILENAMES: "/nonexistent.json" };
  const err = await run(process.execPath, [CLI, "conformance", "--device", "webgpu", "--op", "add"], { env }).then(() => null, (e) => e);
  assert.ok(err, "expected the command to fail without an adapter");
  assert.match(err.stderr, /webgpu: no GPU adapter found/);
  assert.match(err.stderr, /mesa-vulkan-drivers/);
});

/** Dawn GPU objects referenced for the life of the process (dawn.node aborts when one is collected; see dawn.ts). */
const keepForProcess: unknown[] = [];

test("the reduction check passes Dawn's default adapter, and judges its OpenGL ES fallback by the driver's known behaviour", async (t) => {
  // The check refuses an adapter that computes workgroup reductions wrong (Debian 12's Mesa 22.3
  // llvmpipe behind the OpenGL ES backend: layerNorm, groupNorm and attention failed conformance
  // there); on a correct driver it must not refuse. Both adapters are fresh (one device each).
  if (!(await webgpuOrSkip(t))) return;
  const dawn = await import("webgpu");
  const gpu = dawn.create([]), glGpu = dawn.create(["backend=opengles"]);
  keepForProcess.push(gpu, glGpu);
  const adapter = await gpu.requestAdapter();
  assert.ok(adapter, "Dawn's default backend gave no adapter though the device opened");
  assert.equal(await workgroupReductionsWork(adapter), true);
  process.env.EGL_PLATFORM ??= "surfaceless";
  const gl = await glGpu.requestAdapter({ featureLevel: "compatibility" });
  if (!gl) return t.diagnostic("no OpenGL ES adapter on this host: its check not exercised");
  // The GL stack may be older than the Vulkan driver (backports' mesa-vulkan-drivers beside Debian's
  // own GL Mesa): Mesa 25 computes right, Mesa 22 wrong; other versions are only reported.
  const name = adapterName(gl), mesa = Number(/Mesa (\d+)\./.exec(name)?.[1] ?? NaN);
  const works = await workgroupReductionsWork(gl);
  if (mesa >= 25) assert.equal(works, true, `${name}: the check refused a driver that runs conformance right`);
  else if (mesa <= 22) assert.equal(works, false, `${name}: the check passed a driver known to compute reductions wrong`);
  else t.diagnostic(`${name}: reduction check ${works ? "passed" : "refused"} (no verdict known for this Mesa)`);
});
