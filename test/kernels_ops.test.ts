/**
 * The hub kernels of hub-kernels/ (rmsnorm, silu-and-mul, moe-grouped-gemm), each op on cpu
 * (cpu-wasm) and webgpu (webgpu-wgsl) against tsorch's built-in ops within 1e-4 (the built-ins are
 * tested against transformers), including bfloat16 weights; and the dtype check of signatures.
 */
import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import * as path from "node:path";
import * as T from "../src/index.js";
import { getKernel } from "../src/kernels/index.js";
import { routeTopK } from "../src/nn/moe.js";
import type { Device } from "../src/devices/device.js";
import { ROOT, maxAbsDiff } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

const KERNELS = path.join(ROOT, "hub-kernels");

/** A deterministic float32 tensor with values in [-1, 1). */
function rand(shape: number[], seed: number): T.Tensor {
  let s = seed >>> 0;
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n).map(() => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 31) - 1);
  return T.tensor(v, { shape });
}

async function close(a: T.Tensor, b: T.Tensor, tol = 1e-4): Promise<void> {
  assert.deepEqual(a.shape, b.shape);
  const d = maxAbsDiff((await a.data()) as Float32Array, (await b.data()) as Float32Array);
  assert.ok(d <= tol, `max |diff| ${d} > ${tol}`);
}

async function onDevices(t: TestContext, fn: (dev: Device | "cpu") => Promise<void>): Promise<void> {
  await t.test("cpu (cpu-wasm)", () => fn("cpu"));
  await t.test("webgpu (webgpu-wgsl)", async (tt) => {
    process.env.XDG_RUNTIME_DIR ??= "/tmp/xdg-runtime";
    const dev = await webgpuOrSkip(tt);
    if (dev) await fn(dev);
  });
}

const on = async (x: T.Tensor, dev: Device | "cpu") => (dev === "cpu" ? x : x.toAsync(dev));

test("rmsnorm: rmsNorm equals the built-in op (float32 and bfloat16 weights, offset 0 and 1)", async (t) => {
  const k = await getKernel(path.join(KERNELS, "rmsnorm"));
  assert.equal(k.name, "rmsnorm");
  await onDevices(t, async (dev) => {
    const x = await on(rand([3, 5, 64], 1), dev);
    for (const dtype of ["float32", "bfloat16"] as const) {
      const w = await on(rand([64], 2).to(dtype), dev);
      for (const offset of [0, 1]) await close(k.rmsNorm(x, w, 1e-6, offset), T.rmsNorm(x, w, 1e-6, offset));
    }
  });
});

test("a dtype the signature excludes throws naming the kernel, the op and the argument", async () => {
  const k = await getKernel(path.join(KERNELS, "rmsnorm"));
  assert.throws(() => k.rmsNorm(rand([2, 8], 1), rand([8], 2).to("float16"), 1e-6),
    /kernel .*rmsnorm: op rmsNorm: weight has dtype float16, but its signature allows float32, bfloat16/);
  assert.throws(() => k.rmsNorm(rand([2, 8], 1), rand([6], 2), 1e-6), /op rmsNorm: weight has shape \[6\], which does not match \[H\] with H=8/);
  assert.throws(() => k.rmsNorm(rand([2, 6], 1), rand([6], 2), 1e-6), /op rmsNorm: arguments break the rule H % 4 == 0/);
});
