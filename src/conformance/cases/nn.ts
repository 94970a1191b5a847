/**
 * Conformance cases: matmul, linear, gatherLinear, scaled dot-product attention, rmsNorm,
 * layerNorm, rotary, embedding. Dot products are checked against float64 with an error that
 * scales with sum |a_k * b_k| (the usual floating-point bound), not with the result alone.
 */
import * as T from "../../tensor/ops.js";
import type { DType } from "../../tensor/dtype.js";
import type { Tensor } from "../../tensor/tensor.js";
import { exact, floats, input, Rng, ulps, type Case, type Input } from "../case.js";
import { broadcastShape, cast, castTensor, EXACT, host, num, numel, stridesOf, unravel, type HostTensor, type Tolerance } from "../reference.js";

/** Float32 values of a host tensor (the front-end converts inputs to float32). */
function f32(t: HostTensor): number[] {
  return t.values.map((v) => num(cast(v, t.dtype, "float32")));
}

/** Tolerance of a length-K dot product: a few ulps plus sqrt(K) of accumulated rounding. */
function dotTol(K: number): Tolerance {
  return ulps(4 + Math.ceil(Math.sqrt(K)));
}

/**
 * A product with bfloat16 weights: hosts with a bfloat16 dot-product GEMM (cpu, AVX512-BF16) round
 * the activations to bfloat16 as PyTorch's bfloat16 layers do, a relative error of up to 2^-9 per term.
 */
function bf16WeightTol(K: number, w: Input): Tolerance {
  return w.t.dtype === "bfloat16" ? ulps(2 ** 14 + 4 + Math.ceil(Math.sqrt(K))) : dotTol(K);
}

// ------------------------------------------------------------------ matmul

function matmulCase(name: string, a: Input, b: Input): Case {
  const A = f32(a.t), B = f32(b.t);
  const as = a.t.shape.length === 1 ? [1, a.t.shape[0]] : a.t.shape, bs = b.t.shape.length === 1 ? [b.t.shape[0], 1] : b.t.shape;
  const [M, K] = as.slice(-2), N = bs[bs.length - 1];
  const batch = broadcastShape(as.slice(0, -2), bs.slice(0, -2));
  const aSt = stridesOf(as), bSt = stridesOf(bs);
  const values: number[] = [], mag: number[] = [];
  for (let o = 0; o < numel(batch) * M * N; o++) {
    const bi = unravel(Math.floor(o / (M * N)), batch), m = Math.floor(o / N) % M, n = o % N;
    const off = (shape: number[], st: number[]) => shape.slice(0, -2).reduce((acc, s, d) => acc + (s === 1 ? 0 : bi[batch.length - (shape.length - 2) + d]) * st[d], 0);
    const ao = off(as, aSt), bo = off(bs, bSt);
    let s = 0, g = 0;
    for (let k = 0; k < K; k++) {
      const p = A[ao + m * K + k] * B[bo + k * N + n];
      s += p;
      g += Math.abs(p);
    }
    values.push(s);
    mag.push(g);
  }
  let shape = [...batch, M, N];
  if (a.t.shape.length === 1) shape = shape.filter((_, i) => i !== shape.length - 2);
  if (b.t.shape.length === 1) shape = shape.slice(0, -1);
  return { op: "matmul", name, inputs: [a, b], run: ([x, y]) => T.matmul(x, y), expect: [floats("float32", shape, values, mag)], tol: dotTol(K) };
}

function matmulCases(rng: Rng): Case[] {
  return [
    matmulCase("[3,4] @ [4,5]", input(rng.tensor([3, 4])), input(rng.tensor([4, 5]))),
    matmulCase("1-D @ 1-D -> 0-d", input(rng.tensor([6])), input(rng.tensor([6]))),
    matmulCase("[2,3,4] @ 1-D", input(rng.tensor([2, 3, 4])), input(rng.tensor([4]))),
    matmulCase("1-D @ [2,5,3]", input(rng.tensor([5])), input(rng.tensor([2, 5, 3]))),
    matmulCase("batch broadcast [2,1,3,4] @ [3,4,6]", input(rng.tensor([2, 1, 3, 4])), input(rng.tensor([3, 4, 6]))),
    matmulCase("transposed views", input(rng.tensor([3, 7]), "transposed"), input(rng.tensor([7, 2]), "transposed")),
    matmulCase("strided and offset views", input(rng.tensor([2, 5]), "strided"), input(rng.tensor([5, 3]), "offset")),
    matmulCase("K = 0 gives zeros", input(host("float32", [2, 0], [])), input(host("float32", [0, 3], []))),
    matmulCase("[70,130] @ [130,65] (several tiles)", input(rng.tensor([70, 130])), input(rng.tensor([130, 65]))),
    matmulCase("float16 @ int64 (computed in float32)", input(rng.tensor([2, 3], -2, 2, "float16")), input(rng.ints([3, 2], -3, 3))),
    matmulCase("inf and NaN propagate", input(host("float32", [2, 2], [Infinity, 1, NaN, 2])), input(host("float32", [2, 2], [0, 1, 1, 3]))),
  ];
}

// ------------------------------------------------------------------ linear, gatherLinear

/** out[m, n] = sum_k x[m,k] w[n,k] (+ bias[n]) with magnitudes. */
function linearRef(x: number[], M: number, K: number, w: number[], N: number, bias: number[] | null, rowWeight?: (m: number) => number[]): { values: number[]; mag: number[] } {
  const values: number[] = [], mag: number[] = [];
  for (let m = 0; m < M; m++) {
    const W = rowWeight ? rowWeight(m) : w;
    for (let n = 0; n < N; n++) {
      let s = bias ? bias[n] : 0, g = Math.abs(s);
      for (let k = 0; k < K; k++) {
        const p = x[m * K + k] * W[n * K + k];
        s += p;
        g += Math.abs(p);
      }
      values.push(s);
      mag.push(g);
    }
  }
  return { values, mag };
}

function linearCase(name: string, x: Input, w: Input, bias: Input | null): Case {
  const K = x.t.shape[x.t.shape.length - 1], N = w.t.shape[0], M = numel(x.t.shape.slice(0, -1));
  const r = linearRef(f32(x.t), M, K, f32(w.t), N, bias ? f32(bias.t) : null);
  const shape = [...x.t.shape.slice(0, -1), N];
  const inputs = bias ? [x, w, bias] : [x, w];
  return { op: "linear", name, inputs, run: ([a, b, c]) => T.linear(a, b, c ?? null), expect: [floats("float32", shape, r.values, r.mag)], tol: bf16WeightTol(K, w) };
}

function gatherLinearCase(name: string, x: Input, idx: Input, ws: Input[]): Case {
  const K = x.t.shape[x.t.shape.length - 1], N = ws[0].t.shape[0], M = numel(x.t.shape.slice(0, -1));
  const ids = idx.t.values.map(num);
  const W = ws.map((w) => f32(w.t));
  const shape = [...x.t.shape.slice(0, -1), N];
  const bad = ids.some((e) => e < 0 || e >= ws.length);
  const expect = (): Case["expect"] => {
    if (bad) return { throws: "RangeError" };
    const r = linearRef(f32(x.t), M, K, W[0], N, null, (m) => W[ids[m]]);
    return [floats("float32", shape, r.values, r.mag)];
  };
  return { op: "gatherLinear", name, inputs: [x, idx, ...ws], run: ([a, i, ...w]) => T.gatherLinear(a, w, i), expect: expect(), tol: bf16WeightTol(K, ws[0]) };
}

function linearCases(rng: Rng): Case[] {
  const ws = (E: number, N: number, K: number, dtype: DType = "float32") => Array.from({ length: E }, () => input(rng.tensor([N, K], -1, 1, dtype)));
  return [
    linearCase("1 row, K=64, float32 weight and bias", input(rng.tensor([1, 64])), input(rng.tensor([40, 64])), input(rng.tensor([40]))),
    linearCase("3 rows, K=37, float16 weight, bfloat16 bias", input(rng.tensor([3, 37])), input(rng.tensor([20, 37], -1, 1, "float16")), input(rng.tensor([20], -1, 1, "bfloat16"))),
    linearCase("8 rows, bfloat16 weight", input(rng.tensor([8, 24])), input(rng.tensor([33, 24], -1, 1, "bfloat16")), null),
    linearCase("2 rows, K=16, float16 weight", input(rng.tensor([2, 16])), input(rng.tensor([70, 16], -1, 1, "float16")), null),
    linearCase("float16 weight at an odd element offset", input(rng.tensor([1, 6])), input(rng.tensor([5, 6], -1, 1, "float16"), "offset"), null),
    linearCase("9 rows, float32", input(rng.tensor([9, 16])), input(rng.tensor([10, 16])), null),
    linearCase("33 rows, K=40, bfloat16 weight and bias (skinny, 2 column blocks)", input(rng.tensor([33, 40])), input(rng.tensor([530, 40], -1, 1, "bfloat16")), input(rng.tensor([530], -1, 1, "bfloat16"))),
    linearCase("64 rows, K=24, float16 weight (skinny)", input(rng.tensor([64, 24])), input(rng.tensor([70, 24], -1, 1, "float16")), null),
    linearCase("12 rows, float32 weight and bias (skinny)", input(rng.tensor([12, 32])), input(rng.tensor([9, 32])), input(rng.tensor([9]))),
    linearCase("12 rows, float32 weight 3 elements into its buffer (unaligned: tiled)", input(rng.tensor([12, 32])), input(rng.tensor([9, 32]), "offset"), null),
    linearCase("[70,130] x [65,130]^T + bias (several tiles)", input(rng.tensor([70, 130])), input(rng.tensor([65, 130])), input(rng.tensor([65]))),
    linearCase("3-D transposed input, transposed weight", input(rng.tensor([2, 5, 6]), "transposed"), input(rng.tensor([4, 6]), "transposed"), null),
    linearCase("float16 input", input(rng.tensor([2, 8], -2, 2, "float16")), input(rng.tensor([3, 8])), input(rng.tensor([3]))),
    linearCase("strided input and weight views at offsets", input(rng.tensor([2, 12]), "strided"), input(rng.tensor([5, 12]), "offset"), input(rng.tensor([5]), "offset")),
    linearCase("K = 0 gives the bias", input(host("float32", [2, 0], [])), input(host("float32", [3, 0], [])), input(rng.tensor([3]))),
    gatherLinearCase("3 experts, int64 routes with repeats and an unused expert", input(rng.tensor([5, 8])), input(host("int64", [5], [2n, 0n, 2n, 2n, 0n])), ws(3, 6, 8)),
    gatherLinearCase("bfloat16 experts, [2,3] int32 routes", input(rng.tensor([2, 3, 8])), input(host("int32", [2, 3], [1, 0, 1, 1, 1, 0])), ws(2, 4, 8, "bfloat16")),
    gatherLinearCase("70 rows (several tiles)", input(rng.tensor([70, 16])), input(rng.ints([70], 0, 2)), ws(2, 9, 16)),
    gatherLinearCase("route out of range (RangeError)", input(rng.tensor([2, 4])), input(host("int64", [2], [0n, 2n])), ws(2, 3, 4)),
  ];
}

// ------------------------------------------------------------------ attention

interface SdpaSpec {
  B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  causal?: boolean; window?: number; softcap?: number; scale?: number;
  /** Mask: "bool" padding [B,1,1,Lk] (batch 1 fully masked), "float" [B,Hq,Lq,Lk] additive. */
  mask?: "bool" | "float";
  /** Pass q/k/v as [B, L, H, D] tensors transposed to [B, H, L, D] (the models' layout). */
  transposed?: boolean;
  view?: "strided" | "offset";
  /** dtype of k and v (a half-precision KV cache); default float32. */
  kvDtype?: DType;
  /** Per-query-head attention sinks [Hq] (gpt-oss). */
  sinks?: boolean;
}

function sdpaCase(name: string, s: SdpaSpec, rng: Rng): Case {
  const { B, Hq, Hkv, Lq, Lk, D, Dv } = s;
  const layout = (H: number, L: number, d: number) => (s.transposed ? [B, L, H, d] : [B, H, L, d]);
  const kvd = s.kvDtype ?? "float32";
  const q = rng.tensor(layout(Hq, Lq, D), -1, 1), k = rng.tensor(layout(Hkv, Lk, D), -1, 1, kvd), v = rng.tensor(layout(Hkv, Lk, Dv), -2, 2, kvd);
  const get = (t: HostTensor, H: number, L: number, d: number) => {
    const st = stridesOf(layout(H, L, d));
    return (b: number, h: number, l: number, e: number) => num(t.values[s.transposed ? b * st[0] + l * st[1] + h * st[2] + e : b * st[0] + h * st[1] + l * st[2] + e]);
  };
  const Q = get(q, Hq, Lq, D), Kf = get(k, Hkv, Lk, D), V = get(v, Hkv, Lk, Dv);
  let mask: HostTensor | null = null;
  if (s.mask === "bool") mask = host("bool", [B, 1, 1, Lk], Array.from({ length: B * Lk }, (_, i) => (i >= Lk ? 0 : i % 3 === 1 ? 0 : 1)));
  if (s.mask === "float") mask = rng.tensor([B, Hq, Lq, Lk], -2, 1);
  const maskAt = (b: number, h: number, i: number, j: number): number => {
    if (!mask) return 0;
    if (mask.dtype === "bool") return num(mask.values[b * Lk + j]) ? 0 : -Infinity;
    return num(mask.values[((b * Hq + h) * Lq + i) * Lk + j]);
  };
  const sinks = s.sinks ? rng.tensor([Hq], -1, 2) : null;
  const scale = s.scale ?? 1 / Math.sqrt(D);
  const off = s.causal ? Lk - Lq : -1;
  const values: number[] = [], mag: number[] = [];
  for (let b = 0; b < B; b++) for (let h = 0; h < Hq; h++) for (let i = 0; i < Lq; i++) {
    const hk = Math.floor(h / (Hq / Hkv));
    const sc: number[] = [];
    let spread = 0;
    for (let j = 0; j < Lk; j++) {
      let dot = 0, g = 0;
      for (let d = 0; d < D; d++) { dot += Q(b, h, i, d) * Kf(b, hk, j, d); g += Math.abs(Q(b, h, i, d) * Kf(b, hk, j, d)); }
      let x = dot * scale;
      if (s.softcap) x = s.softcap * Math.tanh(x / s.softcap);
      if ((off >= 0 && j > i + off) || (s.window && j <= i + off - s.window)) x = -Infinity;
      x += maskAt(b, h, i, j);
      sc.push(x);
      if (x !== -Infinity) spread = Math.max(spread, g * scale);
    }
    const sink = sinks ? num(sinks.values[h]) : -Infinity;
    const m = Math.max(...sc, -Infinity);
    const top = Math.max(m, sink);
    const p = sc.map((x) => (m === -Infinity ? 0 : Math.exp(x - top)));
    // The sink joins the softmax's denominator only (its column is dropped).
    const total = p.reduce((a, c) => a + c, 0) + (sinks && m !== -Infinity ? Math.exp(sink - top) : 0);
    for (let d = 0; d < Dv; d++) {
      let o = 0, g = 0;
      for (let j = 0; j < Lk; j++) {
        const w = total > 0 ? p[j] / total : 0;
        o += w * V(b, hk, j, d);
        g += w * Math.abs(V(b, hk, j, d));
      }
      values.push(o);
      mag.push(g * (1 + spread));
    }
  }
  const view = s.view ?? "contiguous";
  const inputs = [input(q, view), input(k, view), input(v, view), ...(mask ? [input(mask)] : []), ...(sinks ? [input(sinks)] : [])];
  const run = ([a, bk, c, ...rest]: Tensor[]) => {
    const t = (x: Tensor) => (s.transposed ? x.transpose(1, 2) : x);
    const msk = mask ? rest[0] : null, snk = sinks ? rest[rest.length - 1] : null;
    return T.scaledDotProductAttention(t(a), t(bk), t(c), { isCausal: s.causal, window: s.window, softcap: s.softcap, scale: s.scale, mask: msk, sinks: snk });
  };
  return { op: "scaledDotProductAttention", name, inputs, run, expect: [floats("float32", [B, Hq, Lq, Dv], values, mag)], tol: ulps(8 + Math.ceil(Math.sqrt(D + Lk))) };
}

function sdpaCases(rng: Rng): Case[] {
  const base = { B: 1, Hq: 2, Hkv: 2, D: 8, Dv: 8 };
  return [
    sdpaCase("non-causal [1,2,3,8]", { ...base, Lq: 3, Lk: 3 }, rng),
    sdpaCase("causal prefill, grouped heads 4/2, model layout", { ...base, Hq: 4, Lq: 5, Lk: 5, causal: true, transposed: true }, rng),
    sdpaCase("decode: 1 query over 9 keys", { ...base, Lq: 1, Lk: 9, causal: true }, rng),
    sdpaCase("3 queries over 7 keys, causal", { ...base, B: 2, Lq: 3, Lk: 7, causal: true }, rng),
    sdpaCase("sliding window 3", { ...base, Lq: 8, Lk: 8, causal: true, window: 3 }, rng),
    sdpaCase("soft-capping 5, scale 0.3", { ...base, Lq: 4, Lk: 4, causal: true, softcap: 5, scale: 0.3 }, rng),
    sdpaCase("attention sinks, grouped heads 4/2, sliding window 3, padding", { ...base, B: 2, Hq: 4, Lq: 6, Lk: 6, causal: true, window: 3, sinks: true, mask: "bool", transposed: true }, rng),
    sdpaCase("attention sinks, decode over 70 keys", { ...base, Lq: 1, Lk: 70, causal: true, sinks: true }, rng),
    sdpaCase("bool padding mask, one batch fully masked", { ...base, B: 2, Lq: 2, Lk: 5, mask: "bool" }, rng),
    sdpaCase("float additive mask", { ...base, Hq: 4, Hkv: 1, Lq: 3, Lk: 6, mask: "float" }, rng),
    sdpaCase("value size 4 != key size 8", { ...base, Lq: 3, Lk: 5, Dv: 4, causal: true }, rng),
    sdpaCase("100 keys (several chunks), 2 queries", { ...base, Lq: 2, Lk: 100, causal: true }, rng),
    sdpaCase("strided q, k, v", { ...base, Lq: 3, Lk: 4, view: "strided" }, rng),
    sdpaCase("q, k, v at element offsets", { ...base, Lq: 2, Lk: 3, view: "offset", causal: true }, rng),
    sdpaCase("head size 64", { ...base, Hq: 1, Hkv: 1, Lq: 2, Lk: 3, D: 64, Dv: 64 }, rng),
    sdpaCase("no queries", { ...base, Lq: 0, Lk: 3 }, rng),
    sdpaCase("bfloat16 keys/values (KV cache), causal decode over 70 keys", { ...base, Hq: 4, Lq: 1, Lk: 70, causal: true, kvDtype: "bfloat16" }, rng),
    sdpaCase("float16 keys/values, strided, prefill", { ...base, Lq: 5, Lk: 5, causal: true, view: "strided", kvDtype: "float16" }, rng),
    sdpaCase("bfloat16 keys/values in the model layout, sliding window", { ...base, Lq: 6, Lk: 6, causal: true, window: 2, transposed: true, kvDtype: "bfloat16" }, rng),
    // Decode-sized products (<= 4 query rows per kv head) take the cpu's direct P.V kernel: value
    // sizes past one 64-wide chunk and not a multiple of 16, every cache dtype.
    sdpaCase("decode, value size 80, float16 keys/values, grouped heads 4/2", { ...base, Hq: 4, Lq: 1, Lk: 37, causal: true, D: 16, Dv: 80, kvDtype: "float16" }, rng),
    sdpaCase("decode, head size 128, bfloat16 keys/values in the model layout, grouped heads 6/2", { ...base, Hq: 6, Lq: 1, Lk: 21, causal: true, D: 128, Dv: 128, transposed: true, kvDtype: "bfloat16" }, rng),
    sdpaCase("2 queries, value size 24, grouped heads 4/2 (4 rows per kv head)", { ...base, Hq: 4, Lq: 2, Lk: 11, causal: true, Dv: 24 }, rng),
    // Value rows of 64 + 16 + 8 (the vector column blocks, then scalar ones) read as stored.
    sdpaCase("bfloat16 keys/values, value size 88, grouped decode over 40 keys, model layout", { ...base, Hq: 4, Lq: 1, Lk: 40, D: 64, Dv: 88, causal: true, transposed: true, kvDtype: "bfloat16" }, rng),
    sdpaCase("float16 keys/values, value size 88, 2 queries over 40 keys", { ...base, Lq: 2, Lk: 40, D: 64, Dv: 88, causal: true, kvDtype: "float16" }, rng),
  ];
}

// ------------------------------------------------------------------ norms, rotary, embedding

function rmsNormCase(name: string, x: Input, w: Input, eps: number, offset = 0): Case {
  const X = f32(x.t), W = f32(w.t);
  const n = x.t.shape[x.t.shape.length - 1];
  const values: number[] = [];
  for (let r = 0; r < X.length / n; r++) {
    const row = X.slice(r * n, (r + 1) * n);
    const inv = 1 / Math.sqrt(row.reduce((a, b) => a + b * b, 0) / n + eps);
    row.forEach((v, k) => values.push(v * inv * (offset + W[k])));
  }
  return { op: "rmsNorm", name, inputs: [x, w], run: ([a, b]) => T.rmsNorm(a, b, eps, offset), expect: [floats("float32", x.t.shape, values)], tol: ulps(6) };
}

function layerNormCase(name: string, x: Input, w: Input | null, b: Input | null, eps: number): Case {
  const X = f32(x.t), W = w ? f32(w.t) : null, Bv = b ? f32(b.t) : null;
  const n = x.t.shape[x.t.shape.length - 1];
  const values: number[] = [], mag: number[] = [];
  for (let r = 0; r < X.length / n; r++) {
    const row = X.slice(r * n, (r + 1) * n);
    const mean = row.reduce((a, c) => a + c, 0) / n;
    const inv = 1 / Math.sqrt(row.reduce((a, c) => a + (c - mean) ** 2, 0) / n + eps);
    const scale = row.reduce((a, c) => a + Math.abs(c), 0) / n;
    row.forEach((v, k) => {
      values.push((v - mean) * inv * (W ? W[k] : 1) + (Bv ? Bv[k] : 0));
      mag.push((Math.abs(v - mean) + scale) * inv * Math.abs(W ? W[k] : 1) + Math.abs(Bv ? Bv[k] : 0));
    });
  }
  const inputs = [x, ...(w ? [w] : []), ...(b ? [b] : [])];
  const run = (ts: Tensor[]) => T.layerNorm(ts[0], w ? ts[1] : null, b ? ts[w ? 2 : 1] : null, eps);
  return { op: "layerNorm", name, inputs, run, expect: [floats("float32", x.t.shape, values, mag)], tol: ulps(8) };
}

function rotaryCase(name: string, shape: [number, number, number, number], R: number, rng: Rng, view: "contiguous" | "transposed" = "contiguous"): Case {
  const [B, L, H, D] = shape;
  const x = rng.tensor(shape);
  const angles = Array.from({ length: B * L * R }, (_, i) => Math.fround((i % 7) * 0.7 + Math.floor(i / R)));
  const cos = host("float32", [B, L, R], angles.map((a) => Math.fround(Math.cos(a)))), sin = host("float32", [B, L, R], angles.map((a) => Math.fround(Math.sin(a))));
  const X = f32(x), C = f32(cos), S = f32(sin), half = R / 2;
  const values: number[] = [], mag: number[] = [];
  for (let i = 0; i < X.length; i++) {
    const d = i % D, bl = Math.floor(i / (H * D));
    if (d >= R) { values.push(X[i]); mag.push(Math.abs(X[i])); continue; }
    const c = C[bl * R + d], s = S[bl * R + d], other = d < half ? -X[i + half] : X[i - half];
    values.push(X[i] * c + other * s);
    mag.push(Math.abs(X[i] * c) + Math.abs(other * s));
  }
  return { op: "applyRotary", name, inputs: [input(x, view), input(cos), input(sin)], run: ([a, c, s]) => T.applyRotary(a, c, s), expect: [floats("float32", shape, values, mag)], tol: ulps(2) };
}

function embeddingCase(name: string, ids: Input, table: Input): Case {
  const [V, dim] = table.t.shape;
  const idv = ids.t.values.map(num);
  const bad = idv.some((i) => i < 0 || i >= V);
  const tf = castTensor(table.t, "float32");
  const values = idv.flatMap((i) => tf.values.slice(i * dim, (i + 1) * dim));
  return {
    op: "embedding", name, inputs: [ids, table], run: ([i, t]) => T.embedding(i, t),
    expect: bad ? { throws: "RangeError" } : [exact(host("float32", [...ids.t.shape, dim], values))], tol: EXACT,
  };
}

function normCases(rng: Rng): Case[] {
  const big = host("float32", [2, 4], [1e15, -2e15, 3e14, 0, 1e-20, -3e-20, 2e-20, 0]);
  const shifted = host("float32", [2, 6], Array.from({ length: 12 }, () => Math.fround(1e4 + rng.uniform(-1, 1))));
  return [
    rmsNormCase("float32 [3, 16]", input(rng.tensor([3, 16])), input(rng.tensor([16])), 1e-5),
    rmsNormCase("float16 weight, offset 1 (Gemma)", input(rng.tensor([2, 5])), input(rng.tensor([5], -1, 1, "float16")), 1e-6, 1),
    rmsNormCase("zero row and large / tiny magnitudes", input(big), input(rng.tensor([4])), 1e-6),
    rmsNormCase("transposed float16 input", input(rng.tensor([6, 3], -2, 2, "float16"), "transposed"), input(rng.tensor([3], -1, 1, "bfloat16")), 1e-5),
    rmsNormCase("128 wide rows at an offset", input(rng.tensor([2, 128]), "offset"), input(rng.tensor([128])), 1e-5),
    layerNormCase("float32 weight and bias", input(rng.tensor([3, 10])), input(rng.tensor([10])), input(rng.tensor([10])), 1e-5),
    layerNormCase("weight only, bfloat16", input(rng.tensor([2, 7])), input(rng.tensor([7], -1, 1, "bfloat16")), null, 1e-5),
    layerNormCase("no weight, no bias, strided", input(rng.tensor([2, 9]), "strided"), null, null, 1e-6),
    layerNormCase("mean 1e4 with small spread", input(shifted), input(rng.tensor([6])), input(rng.tensor([6])), 1e-5),
    rotaryCase("[1,3,2,8] full rotary", [1, 3, 2, 8], 8, rng),
    rotaryCase("partial rotary 4 of 8, batch 2", [2, 2, 3, 8], 4, rng),
    rotaryCase("transposed input", [1, 2, 4, 4], 4, rng, "transposed"),
    embeddingCase("float32 table, int64 ids [2,3]", input(rng.ints([2, 3], 0, 10)), input(rng.tensor([10, 6]))),
    embeddingCase("float16 table, int32 ids, strided", input(rng.ints([4], 0, 5, "int32"), "strided"), input(rng.tensor([5, 3], -2, 2, "float16"))),
    embeddingCase("bfloat16 table at an offset, 0-d id", input(host("int64", [], [2n])), input(rng.tensor([3, 5], -2, 2, "bfloat16"), "offset")),
    embeddingCase("id == vocab size (RangeError)", input(host("int64", [2], [1n, 10n])), input(rng.tensor([10, 2]))),
    embeddingCase("negative id (RangeError)", input(host("int32", [1], [-1])), input(rng.tensor([4, 2]))),
  ];
}

export function nnCases(): Case[] {
  const rng = new Rng(7);
  return [...matmulCases(rng), ...linearCases(rng), ...sdpaCases(rng), ...normCases(rng)];
}
