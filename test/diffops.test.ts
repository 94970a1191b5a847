/**
 * The image ops (conv2d, groupNorm, interpolate, pad) against PyTorch's own outputs
 * (test/data/diffops_reference.json, made by test/data/diffops_reference.py), the nn modules'
 * checkpoint names, and conv2d on cpu at sizes where the im2col chunks and the converted-weight
 * blocks split mid-row (checked against float64 at sampled outputs).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import type { Device } from "../src/devices/device.js";
import { openDevice } from "../src/devices/registry.js";
import * as torch from "../src/index.js";
import { Conv2d, GroupNorm } from "../src/nn/index.js";
import { ROOT } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { lcgValues } from "./helpers/lcg.js";

interface Json { shape: number[]; values: number[] }
interface RefCase {
  op: string; name: string; x: Json; w?: Json; b?: Json | null; wDtype?: "float16";
  opts?: Record<string, unknown>; groups?: number; eps?: number; pads?: number[]; value?: number; out: Json;
}
const REF = JSON.parse(readFileSync(join(ROOT, "test/data/diffops_reference.json"), "utf8")) as { cases: RefCase[]; stateDictNames: Record<string, string[]> };

function put(j: Json, device: Device, dtype: torch.DType = "float32"): torch.Tensor {
  return torch.tensor(j.values, { shape: j.shape }).to(device, dtype);
}

function run(c: RefCase, device: Device): torch.Tensor {
  const x = put(c.x, device);
  switch (c.op) {
    case "conv2d": return torch.conv2d(x, put(c.w!, device, c.wDtype), c.b ? put(c.b, device) : null, c.opts);
    case "groupNorm": return torch.groupNorm(x, c.groups!, put(c.w!, device), put(c.b!, device), c.eps);
    case "interpolate": return torch.interpolate(x, c.opts as unknown as torch.InterpolateOptions);
    case "pad": return torch.pad(x, c.pads!, c.value);
    default: throw new Error(`unknown op ${c.op}`);
  }
}

async function checkAgainstTorch(device: Device, atol: number): Promise<void> {
  for (const c of REF.cases) {
    const got = run(c, device);
    assert.deepEqual(got.shape, c.out.shape, `${c.op} ${c.name}: shape`);
    const values = (await got.data()) as Float32Array;
    const bad = c.out.values.findIndex((want, i) => !(Math.abs(values[i] - want) <= atol * (1 + Math.abs(want))));
    assert.equal(bad, -1, `${c.op} ${c.name}: [${bad}] ${values[bad]} vs torch ${c.out.values[bad]}`);
  }
}

test("image ops on cpu match PyTorch (conv2d, group_norm, interpolate nearest, pad)", async () => {
  await checkAgainstTorch(await openDevice("cpu"), 1e-5);
});

test("image ops on webgpu match PyTorch", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (dev) await checkAgainstTorch(dev, 1e-4);
});

test("Conv2d and GroupNorm declare PyTorch's state_dict names and shapes", () => {
  const conv = new Conv2d(4, 6, 3, { groups: 2, padding: 1 });
  assert.deepEqual([...conv.namedParameters()].map(([n]) => n).sort(), REF.stateDictNames.Conv2d);
  assert.deepEqual(conv.weight.shape, [6, 2, 3, 3]);
  assert.deepEqual([...new GroupNorm(2, 4).namedParameters()].map(([n]) => n).sort(), REF.stateDictNames.GroupNorm);
  assert.throws(() => new Conv2d(4, 6, 3, { groups: 4 }), /Conv2d: groups=4 must divide in_channels=4 and out_channels=6/);
  assert.throws(() => new GroupNorm(3, 4), /GroupNorm: num_groups=3 must divide num_channels=4/);
});

test("Conv2d and GroupNorm forward with loaded weights", async () => {
  const conv = new Conv2d(2, 3, [1, 2], { bias: false });
  conv.weight.set(torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], { shape: [3, 2, 1, 2] }));
  const x = torch.tensor([1, 0, 2, 0, 1, 3], { shape: [1, 2, 1, 3] });
  // out[o, 0, j] = sum_c w[o, c, 0, 0] x[c, 0, j] + w[o, c, 0, 1] x[c, 0, j + 1], x = [[1, 0, 2], [0, 1, 3]]
  assert.deepEqual([...((await conv.forward(x).data()) as Float32Array)], [1 + 4, 2 * 2 + 3 + 4 * 3, 5 + 8, 6 * 2 + 7 + 8 * 3, 9 + 12, 10 * 2 + 11 + 12 * 3]);
  const gn = new GroupNorm(1, 2, 0);
  gn.weight!.set(torch.tensor([2, 2]));
  gn.bias!.set(torch.tensor([1, 1]));
  const y = (await gn.forward(torch.tensor([1, 3, 1, 3], { shape: [1, 2, 2] })).data()) as Float32Array;
  assert.deepEqual([...y], [-1, 3, -1, 3]);
});

test("conv2d on cpu at 1280 channels: im2col chunks and float16 weight blocks split mid-row", async () => {
  const cases = [
    { name: "float16 weight, 3x3, padding 1", C: 1280, O: 200, H: 12, W: 12, stride: 1, dtype: "float16" as const },
    { name: "float32 weight, stride 2", C: 1280, O: 24, H: 25, W: 25, stride: 2, dtype: "float32" as const },
  ];
  for (const c of cases) {
    const x = lcgValues(c.C * c.H * c.W, 1), w = torch.tensor(lcgValues(c.O * c.C * 9, 2), { shape: [c.O, c.C, 3, 3] }).to(c.dtype), b = lcgValues(c.O, 3);
    const wv = (await w.to("float32").data()) as Float32Array;
    const out = torch.conv2d(torch.tensor(x, { shape: [1, c.C, c.H, c.W] }), w, torch.tensor(b), { stride: c.stride, padding: 1 });
    const [, , Ho, Wo] = out.shape;
    const got = (await out.data()) as Float32Array;
    for (let s = 0; s < 300; s++) {
      const i = (s * 7919) % got.length, o = Math.floor(i / (Ho * Wo)), ho = Math.floor(i / Wo) % Ho, wo = i % Wo;
      let acc = b[o], mag = Math.abs(b[o]);
      for (let ch = 0; ch < c.C; ch++) for (let ki = 0; ki < 3; ki++) for (let kj = 0; kj < 3; kj++) {
        const hi = ho * c.stride - 1 + ki, wi = wo * c.stride - 1 + kj;
        if (hi < 0 || hi >= c.H || wi < 0 || wi >= c.W) continue;
        const p = x[(ch * c.H + hi) * c.W + wi] * wv[((o * c.C + ch) * 3 + ki) * 3 + kj];
        acc += p;
        mag += Math.abs(p);
      }
      assert.ok(Math.abs(got[i] - acc) <= 120 * 2 ** -23 * mag, `${c.name}: out[${o}, ${ho}, ${wo}] = ${got[i]}, expected ${acc}`);
    }
  }
});

test("webgpu image ops agree with cpu at sizes spanning several tiles (2 samples, 2 groups, 160 channels, float16 weights)", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const x = torch.tensor(lcgValues(2 * 96 * 19 * 21, 4), { shape: [2, 96, 19, 21] });
  const w = torch.tensor(lcgValues(160 * 48 * 9, 5), { shape: [160, 48, 3, 3] }).to("float16"), b = torch.tensor(lcgValues(160, 6));
  const gw = torch.tensor(lcgValues(160, 7)), gb = torch.tensor(lcgValues(160, 8));
  const pipeline = (xx: torch.Tensor, ww: torch.Tensor, bb: torch.Tensor, gww: torch.Tensor, gbb: torch.Tensor) =>
    torch.interpolate(torch.groupNorm(torch.conv2d(xx, ww, bb, { padding: 1, groups: 2, stride: [1, 2] }), 8, gww, gbb, 1e-6), { scaleFactor: 2, mode: "nearest" });
  const want = (await pipeline(x, w, b, gw, gb).data()) as Float32Array;
  const got = (await pipeline(x.to(dev), w.to(dev), b.to(dev), gw.to(dev), gb.to(dev)).data()) as Float32Array;
  assert.equal(got.length, want.length);
  const bad = want.findIndex((v, i) => !(Math.abs(got[i] - v) <= 1e-4 * (1 + Math.abs(v))));
  assert.equal(bad, -1, `[${bad}] webgpu ${got[bad]} vs cpu ${want[bad]}`);
});
