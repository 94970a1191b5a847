/**
 * Conformance cases of the image ops: conv2d (stride, padding, dilation, groups, bias, half
 * weights), groupNorm, interpolate (nearest, PyTorch's float32 index rule) and pad (constant).
 * References are float64; conv2d's error scales with sum |x * w| over each output's window.
 */
import * as S from "../../tensor/spatial.js";
import type { DType } from "../../tensor/dtype.js";
import type { Tensor } from "../../tensor/tensor.js";
import { exact, floats, input, Rng, ulps, type Case, type Input } from "../case.js";
import { cast, host, num, numel, roundFloat, type HostTensor } from "../reference.js";

function f32(t: HostTensor): number[] {
  return t.values.map((v) => num(cast(v, t.dtype, "float32")));
}

// ------------------------------------------------------------------ conv2d

interface ConvSpec {
  stride?: [number, number];
  padding?: [number, number];
  dilation?: [number, number];
  groups?: number;
}

function conv2dCase(name: string, x: Input, w: Input, bias: Input | null, s: ConvSpec, unbatched = false): Case {
  const [sh, sw] = s.stride ?? [1, 1], [ph, pw] = s.padding ?? [0, 0], [dh, dw] = s.dilation ?? [1, 1], G = s.groups ?? 1;
  const xs = unbatched ? [1, ...x.t.shape] : x.t.shape;
  const [N, C, H, W] = xs, [O, Cg, kh, kw] = w.t.shape;
  const X = f32(x.t), Wt = f32(w.t), Bv = bias ? f32(bias.t) : null;
  const Ho = Math.floor((H + 2 * ph - dh * (kh - 1) - 1) / sh) + 1, Wo = Math.floor((W + 2 * pw - dw * (kw - 1) - 1) / sw) + 1;
  const opts = { stride: s.stride, padding: s.padding, dilation: s.dilation, groups: s.groups };
  const inputs = bias ? [x, w, bias] : [x, w];
  const run = ([a, b, c]: Tensor[]) => S.conv2d(a, b, c ?? null, opts);
  const K = Cg * kh * kw;
  if (Cg * G !== C || O % G !== 0 || Ho < 1 || Wo < 1) return { op: "conv2d", name, inputs, run, expect: { throws: "RangeError" }, tol: ulps(0) };
  const Og = O / G;
  const values: number[] = [], mag: number[] = [];
  for (let n = 0; n < N; n++) for (let o = 0; o < O; o++) for (let ho = 0; ho < Ho; ho++) for (let wo = 0; wo < Wo; wo++) {
    const g = Math.floor(o / Og);
    let acc = Bv ? Bv[o] : 0, m = Math.abs(acc);
    for (let c = 0; c < Cg; c++) for (let i = 0; i < kh; i++) for (let j = 0; j < kw; j++) {
      const hi = ho * sh - ph + i * dh, wi = wo * sw - pw + j * dw;
      if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
      const p = X[((n * C + g * Cg + c) * H + hi) * W + wi] * Wt[((o * Cg + c) * kh + i) * kw + j];
      acc += p;
      m += Math.abs(p);
    }
    values.push(acc);
    mag.push(m);
  }
  const shape = unbatched ? [O, Ho, Wo] : [N, O, Ho, Wo];
  return { op: "conv2d", name, inputs, run, expect: [floats("float32", shape, values, mag)], tol: ulps(4 + Math.ceil(Math.sqrt(K))) };
}

function conv2dCases(rng: Rng): Case[] {
  const t = (shape: number[], dtype: DType = "float32") => input(rng.tensor(shape, -1, 1, dtype));
  return [
    conv2dCase("3x3, padding 1, float32 bias", t([1, 3, 6, 5]), t([4, 3, 3, 3]), t([4]), { padding: [1, 1] }),
    conv2dCase("stride 2, padding [1, 0], no bias, batch 2", t([2, 2, 7, 6]), t([3, 2, 3, 2]), null, { stride: [2, 2], padding: [1, 0] }),
    conv2dCase("stride [2, 1], odd sizes (SD downsample shape)", t([1, 3, 9, 8]), t([3, 3, 3, 3]), t([3]), { stride: [2, 1], padding: [1, 1] }),
    conv2dCase("dilation 2, padding 2", t([1, 2, 8, 8]), t([2, 2, 3, 3]), null, { dilation: [2, 2], padding: [2, 2] }),
    conv2dCase("groups 2 with bias", t([1, 4, 5, 5]), t([6, 2, 3, 3]), t([6]), { groups: 2, padding: [1, 1] }),
    conv2dCase("depthwise (groups = channels)", t([1, 3, 6, 6]), t([3, 1, 3, 3]), t([3]), { groups: 3, padding: [1, 1] }),
    conv2dCase("1x1, float16 weight, bfloat16 bias", t([2, 8, 4, 4]), t([5, 8, 1, 1], "float16"), t([5], "bfloat16"), {}),
    conv2dCase("1x1 with stride 2", t([1, 3, 5, 5]), t([2, 3, 1, 1]), t([2]), { stride: [2, 2] }),
    conv2dCase("3x3, bfloat16 weight and bias", t([1, 4, 5, 4]), t([3, 4, 3, 3], "bfloat16"), t([3], "bfloat16"), { padding: [1, 1] }),
    conv2dCase("float16 input, strided view", input(rng.tensor([1, 2, 4, 5], -1, 1, "float16"), "strided"), t([3, 2, 2, 2]), null, {}),
    conv2dCase("transposed input and weight views", input(rng.tensor([1, 3, 5, 6], -1, 1), "transposed"), input(rng.tensor([4, 3, 3, 2], -1, 1), "transposed"), null, { padding: [1, 1] }),
    conv2dCase("[1,16,10,12] x [24,16,3,3] (several GEMM tiles)", t([1, 16, 10, 12]), t([24, 16, 3, 3]), t([24]), { padding: [1, 1] }),
    conv2dCase("kernel larger than the input, padded", t([1, 1, 2, 2]), t([1, 1, 3, 3]), null, { padding: [1, 1] }),
    conv2dCase("unbatched [C, H, W] input", t([2, 4, 4]), t([3, 2, 3, 3]), t([3]), { padding: [1, 1] }, true),
    conv2dCase("channels do not match the weight (RangeError)", t([1, 3, 4, 4]), t([2, 2, 3, 3]), null, {}),
    conv2dCase("output smaller than one pixel (RangeError)", t([1, 1, 2, 2]), t([1, 1, 3, 3]), null, {}),
  ];
}

// ------------------------------------------------------------------ groupNorm

function groupNormCase(name: string, x: Input, groups: number, w: Input | null, b: Input | null, eps: number): Case {
  const X = f32(x.t), Wt = w ? f32(w.t) : null, Bv = b ? f32(b.t) : null;
  const [N, C] = x.t.shape, Sz = numel(x.t.shape.slice(2));
  const inputs = [x, ...(w ? [w] : []), ...(b ? [b] : [])];
  const run = (ts: Tensor[]) => S.groupNorm(ts[0], groups, w ? ts[1] : null, b ? ts[w ? 2 : 1] : null, eps);
  if (C % groups !== 0) return { op: "groupNorm", name, inputs, run, expect: { throws: "RangeError" }, tol: ulps(0) };
  const Cg = C / groups, len = Cg * Sz;
  const values = new Array<number>(X.length), mag = new Array<number>(X.length);
  for (let r = 0; r < N * groups; r++) {
    const seg = X.slice(r * len, (r + 1) * len);
    const mean = seg.reduce((a, c) => a + c, 0) / len;
    const inv = 1 / Math.sqrt(seg.reduce((a, c) => a + (c - mean) ** 2, 0) / len + eps);
    const scale = seg.reduce((a, c) => a + Math.abs(c), 0) / len;
    seg.forEach((v, k) => {
      const c = (r % groups) * Cg + Math.floor(k / Sz), ww = Wt ? Wt[c] : 1, bb = Bv ? Bv[c] : 0;
      values[r * len + k] = (v - mean) * inv * ww + bb;
      mag[r * len + k] = (Math.abs(v - mean) + scale) * inv * Math.abs(ww) + Math.abs(bb);
    });
  }
  return { op: "groupNorm", name, inputs, run, expect: [floats("float32", x.t.shape, values, mag)], tol: ulps(8) };
}

function groupNormCases(rng: Rng): Case[] {
  const shifted = host("float32", [1, 4, 3], Array.from({ length: 12 }, () => Math.fround(1e4 + rng.uniform(-1, 1))));
  return [
    groupNormCase("[2,4,3,3], 2 groups, float32 weight and bias", input(rng.tensor([2, 4, 3, 3])), 2, input(rng.tensor([4])), input(rng.tensor([4])), 1e-5),
    groupNormCase("one group, no weight or bias, [1,6,5]", input(rng.tensor([1, 6, 5])), 1, null, null, 1e-6),
    groupNormCase("groups = channels, bfloat16 weight, float16 bias", input(rng.tensor([1, 4, 2, 2])), 4, input(rng.tensor([4], -1, 1, "bfloat16")), input(rng.tensor([4], -1, 1, "float16")), 1e-5),
    groupNormCase("32 groups of 2 channels, eps 1e-6 (SD's GroupNorm)", input(rng.tensor([1, 64, 3, 3])), 32, input(rng.tensor([64])), input(rng.tensor([64])), 1e-6),
    groupNormCase("mean 1e4 with small spread", input(shifted), 2, input(rng.tensor([4])), input(rng.tensor([4])), 1e-5),
    groupNormCase("[N, C] input, strided view", input(rng.tensor([3, 6]), "strided"), 3, input(rng.tensor([6])), null, 1e-5),
    groupNormCase("float16 input at an offset, 5-D", input(rng.tensor([1, 4, 2, 2, 3], -2, 2, "float16"), "offset"), 2, null, input(rng.tensor([4])), 1e-5),
    groupNormCase("groups do not divide channels (RangeError)", input(rng.tensor([1, 6, 2])), 4, null, null, 1e-5),
  ];
}

// ------------------------------------------------------------------ interpolate

/** PyTorch's cpu nearest index (UpSample.h nearest_idx) with float32 arithmetic. */
function nearestIndex(d: number, inSize: number, outSize: number, factor?: number): number {
  if (outSize === inSize) return d;
  if (outSize === 2 * inSize) return d >> 1;
  const scale = Math.fround(factor !== undefined ? 1 / factor : Math.fround(inSize) / Math.fround(outSize));
  return Math.min(Math.floor(Math.fround(d * scale)), inSize - 1);
}

function interpolateCase(name: string, x: Input, opts: S.InterpolateOptions): Case {
  const run = ([a]: Tensor[]) => S.interpolate(a, opts);
  if (opts.mode !== "nearest" || (opts.size === undefined) === (opts.scaleFactor === undefined)) {
    return { op: "interpolate", name, inputs: [x], run, expect: { throws: "RangeError" }, tol: ulps(0) };
  }
  const [N, C, H, W] = x.t.shape;
  const f = opts.scaleFactor === undefined ? undefined : typeof opts.scaleFactor === "number" ? [opts.scaleFactor, opts.scaleFactor] : opts.scaleFactor;
  const size = f ? [Math.floor(H * f[0]), Math.floor(W * f[1])] : typeof opts.size === "number" ? [opts.size, opts.size] : opts.size!;
  const [Ho, Wo] = size;
  const X = f32(x.t), values: number[] = [];
  for (let b = 0; b < N * C; b++) for (let h = 0; h < Ho; h++) for (let w = 0; w < Wo; w++) {
    values.push(X[(b * H + nearestIndex(h, H, Ho, f?.[0])) * W + nearestIndex(w, W, Wo, f?.[1])]);
  }
  return { op: "interpolate", name, inputs: [x], run, expect: [exact(host("float32", [N, C, Ho, Wo], values))], tol: ulps(0) };
}

function interpolateCases(rng: Rng): Case[] {
  const t = (shape: number[]) => input(rng.tensor(shape));
  return [
    interpolateCase("scaleFactor 2 (SD's Upsample2D)", t([1, 2, 3, 4]), { scaleFactor: 2, mode: "nearest" }),
    interpolateCase("size [5, 7] from 3x4", t([1, 2, 3, 4]), { size: [5, 7], mode: "nearest" }),
    interpolateCase("scaleFactor 1.5", t([2, 1, 4, 5]), { scaleFactor: 1.5, mode: "nearest" }),
    interpolateCase("scaleFactor 1.1 keeps the size (identity)", t([1, 1, 5, 5]), { scaleFactor: 1.1, mode: "nearest" }),
    interpolateCase("downsample to size [2, 3]", t([1, 2, 5, 7]), { size: [2, 3], mode: "nearest" }),
    interpolateCase("scaleFactor [3, 0.5]", t([1, 1, 2, 6]), { scaleFactor: [3, 0.5], mode: "nearest" }),
    interpolateCase("size 13 from 5 (float32 rounding of 5/13)", t([1, 1, 5, 5]), { size: 13, mode: "nearest" }),
    interpolateCase("transposed input", input(rng.tensor([1, 2, 4, 3]), "transposed"), { scaleFactor: 2, mode: "nearest" }),
    interpolateCase("bilinear is not supported (RangeError)", t([1, 1, 2, 2]), { scaleFactor: 2, mode: "bilinear" as "nearest" }),
    interpolateCase("size and scaleFactor together (RangeError)", t([1, 1, 2, 2]), { scaleFactor: 2, size: [4, 4], mode: "nearest" }),
  ];
}

// ------------------------------------------------------------------ pad

function padCase(name: string, x: Input, pads: number[], value?: number): Case {
  const run = ([a]: Tensor[]) => S.pad(a, pads, value);
  const shape = [...x.t.shape], nd = shape.length;
  const bad = pads.length % 2 !== 0 || pads.length > 2 * nd;
  for (let i = 0; !bad && i < pads.length / 2; i++) shape[nd - 1 - i] += pads[2 * i] + pads[2 * i + 1];
  if (bad || shape.some((s) => s < 0)) return { op: "pad", name, inputs: [x], run, expect: { throws: "RangeError" }, tol: ulps(0) };
  const lo = new Array<number>(nd).fill(0);
  for (let i = 0; i < pads.length / 2; i++) lo[nd - 1 - i] = pads[2 * i];
  const dt = x.t.dtype;
  const fill = dt === "int64" ? BigInt(value ?? 0) : dt === "int32" ? value ?? 0 : roundFloat(value ?? 0, dt);
  const values = new Array(numel(shape));
  for (let o = 0; o < values.length; o++) {
    let rem = o, src = 0, inside = true;
    const idx = new Array<number>(nd);
    for (let d = nd - 1; d >= 0; d--) { idx[d] = rem % shape[d]; rem = Math.floor(rem / shape[d]); }
    for (let d = 0; d < nd; d++) {
      const i = idx[d] - lo[d];
      if (i < 0 || i >= x.t.shape[d]) inside = false;
      src = src * x.t.shape[d] + i;
    }
    values[o] = inside ? x.t.values[src] : fill;
  }
  return { op: "pad", name, inputs: [x], run, expect: [exact(host(dt, shape, values))], tol: ulps(0) };
}

function padCases(rng: Rng): Case[] {
  return [
    padCase("[2,3], last dim [1, 2]", input(rng.tensor([2, 3])), [1, 2]),
    padCase("[1,2,3,3], [1, 1, 2, 0] with value -1.5", input(rng.tensor([1, 2, 3, 3])), [1, 1, 2, 0], -1.5),
    padCase("negative pads crop", input(rng.tensor([1, 4, 5])), [-1, 2, 1, -2]),
    padCase("int64 with value 7", input(rng.ints([2, 2], -5, 5)), [0, 1, 1, 0], 7),
    padCase("float16 transposed view, all dims", input(rng.tensor([3, 2], -2, 2, "float16"), "transposed"), [1, 0, 0, 2], 0.1),
    padCase("SD downsample pad (0, 1, 0, 1)", input(rng.tensor([1, 2, 4, 4])), [0, 1, 0, 1]),
    padCase("odd number of pads (RangeError)", input(rng.tensor([2, 2])), [1, 1, 1]),
    padCase("negative output size (RangeError)", input(rng.tensor([2, 2])), [-2, -1]),
  ];
}

export function spatialCases(): Case[] {
  const rng = new Rng(11);
  return [...conv2dCases(rng), ...groupNormCases(rng), ...interpolateCases(rng), ...padCases(rng)];
}
