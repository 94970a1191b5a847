/**
 * Conformance cases of the Hub pre-quantized linears (tensor/quant_hub_ops.ts): GPTQ (4 and 8 bits,
 * permuted g_idx as act-order writes it, v1 zero offset), AWQ (4 bits, AutoAWQ's column order) and
 * FP8 e4m3 with block scales (partial edge blocks, subnormal codes), against a float64 product with
 * the weight dequantized here from the same random codes.
 */
import { linearFp8Block, linearPackedInt } from "../../tensor/quant_hub_ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { floats, input, Rng, ulps, type Case } from "../case.js";
import { EXACT, host, type HostTensor } from "../reference.js";
import { words } from "./quant.js";

const AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7];

/** Float64 y = x W^T + bias with W [N, K] given as w(n, k), and the magnitudes the tolerance scales with. */
function product(x: HostTensor, bias: HostTensor | null, M: number, N: number, K: number, w: (n: number, k: number) => number) {
  const xs = x.values as number[], bs = bias ? (bias.values as number[]) : null;
  const values: number[] = [], mag: number[] = [];
  for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
    let s = bs ? bs[n] : 0, g = Math.abs(s);
    for (let k = 0; k < K; k++) {
      const p = xs[m * K + k] * w(n, k);
      s += p;
      g += Math.abs(p);
    }
    values.push(s);
    mag.push(g);
  }
  return { values, mag };
}

/** Pack codes [R, C] into int32 words along rows (dim 0) or columns (dim 1), low bits first. */
function pack(codes: number[], R: number, C: number, bits: number, dim: 0 | 1, order?: number[]): number[] {
  const per = 32 / bits, out: number[] = [];
  const [r1, c1] = dim === 0 ? [R / per, C] : [R, C / per];
  for (let r = 0; r < r1; r++) for (let c = 0; c < c1; c++) {
    let w = 0;
    for (let i = 0; i < per; i++) {
      const j = order ? order[i] : i;
      w += codes[dim === 0 ? (r * per + j) * C + c : r * C + c * per + j] * 2 ** (bits * i);
    }
    out.push(w | 0);
  }
  return out;
}

function packedIntCase(name: string, layout: "gptq" | "awq", bits: 4 | 8, M: number, N: number, K: number, G: number, rng: Rng,
                       opts: { permuted?: boolean; bias?: "float32" | "bfloat16"; offset?: boolean } = {}): Case {
  const maxq = 2 ** bits - 1, zeroOffset = layout === "gptq" ? 1 : 0;
  const q = Array.from({ length: K * N }, () => rng.int(0, maxq + 1));  // [K, N]
  const z = Array.from({ length: G * N }, () => rng.int(0, maxq + 1 - zeroOffset));  // stored zeros [G, N]
  const s = Array.from({ length: G * N }, () => rng.uniform(0.001, 0.05));
  const gIdx = Array.from({ length: K }, (_, k) => Math.floor((k * G) / K));
  if (opts.permuted) for (let k = K - 1; k > 0; k--) { const j = rng.int(0, k + 1); [gIdx[k], gIdx[j]] = [gIdx[j], gIdx[k]]; }
  const x = rng.tensor([M, K]);
  const bias = opts.bias ? rng.tensor([N], -1, 1, opts.bias) : null;
  const { values, mag } = product(x, bias, M, N, K, (n, k) => (q[k * N + n] - z[gIdx[k] * N + n] - zeroOffset) * s[gIdx[k] * N + n]);
  const P = 32 / bits;
  const qweight = layout === "gptq" ? host("int32", [K / P, N], pack(q, K, N, bits, 0)) : host("int32", [K, N / P], pack(q, K, N, bits, 1, AWQ_ORDER));
  const qzeros = host("int32", [G, N / P], pack(z, G, N, bits, 1, layout === "awq" ? AWQ_ORDER : undefined));
  const inputs = [input(x, opts.offset ? "offset" : "contiguous"), input(qweight, opts.offset ? "offset" : "contiguous"), input(qzeros),
    input(host("float32", [G, N], s)), input(host("int32", [K], gIdx))];
  if (bias) inputs.push(input(bias));
  return {
    op: "linearPackedInt", name, kernel: "linearPackedInt", inputs,
    run: ([a, qw, qz, sc, gi, b]: Tensor[]) => linearPackedInt(a, qw, qz, sc, gi, { layout, bits, zeroOffset: zeroOffset as 0 | 1 }, b ?? null),
    expect: [floats("float32", [M, N], values, mag)],
    tol: ulps(4 + Math.ceil(Math.sqrt(K))),
  };
}

/** Value of a float8_e4m3fn byte (NaN codes are not drawn). */
function e4m3(c: number): number {
  const e = (c >> 3) & 15, m = c & 7;
  const v = e === 0 ? m * 2 ** -9 : (1 + m / 8) * 2 ** (e - 7);
  return c & 0x80 ? -v : v;
}

function fp8Case(name: string, M: number, N: number, K: number, block: [number, number], rng: Rng, bias: "float32" | null = null): Case {
  const bytes = Array.from({ length: N * K }, () => { const c = rng.int(0, 255); return (c & 0x7f) === 0x7f ? c - 1 : c; });
  const SN = Math.ceil(N / block[0]), SK = Math.ceil(K / block[1]);
  const scales = Array.from({ length: SN * SK }, () => rng.uniform(0.0005, 0.01));
  const x = rng.tensor([M, K]);
  const b = bias ? rng.tensor([N], -1, 1, bias) : null;
  const { values, mag } = product(x, b, M, N, K, (n, k) => e4m3(bytes[n * K + k]) * scales[Math.floor(n / block[0]) * SK + Math.floor(k / block[1])]);
  const inputs = [input(x), input(host("int32", [N, K / 4], words(bytes))), input(host("float32", [SN, SK], scales))];
  if (b) inputs.push(input(b));
  return {
    op: "linearFp8Block", name, kernel: "linearFp8Block", inputs,
    run: ([a, w, sc, bb]: Tensor[]) => linearFp8Block(a, w, sc, block, bb ?? null),
    expect: [floats("float32", [M, N], values, mag)],
    tol: ulps(4 + Math.ceil(Math.sqrt(K))),
  };
}

export function hubQuantCases(): Case[] {
  const rng = new Rng(15);
  return [
    packedIntCase("gptq 4-bit, 1 row (decode), 2 groups, float32 bias", "gptq", 4, 1, 24, 64, 2, rng, { bias: "float32" }),
    packedIntCase("gptq 4-bit act-order (permuted g_idx), 5 rows, 72 outputs (two cpu panels)", "gptq", 4, 5, 72, 96, 3, rng, { permuted: true }),
    packedIntCase("gptq 8-bit, 3 rows, one group, bfloat16 bias", "gptq", 8, 3, 20, 32, 1, rng, { bias: "bfloat16" }),
    packedIntCase("awq 4-bit, 9 rows, 4 groups, at element offsets", "awq", 4, 9, 40, 64, 4, rng, { offset: true }),
    {
      op: "linearPackedInt", name: "qweight of the wrong shape throws", kernel: "linearPackedInt",
      inputs: [input(rng.tensor([2, 64])), input(host("int32", [8, 16], new Array(128).fill(0))), input(host("int32", [2, 2], [0, 0, 0, 0])),
        input(host("float32", [2, 16], new Array(32).fill(1))), input(host("int32", [64], new Array(64).fill(0)))],
      run: ([a, qw, qz, sc, gi]: Tensor[]) => linearPackedInt(a, qw, qz, sc, gi, { layout: "awq", bits: 4, zeroOffset: 0 }),
      expect: { throws: "RangeError" }, tol: EXACT,
    },
    // Full panels of every cpu tier (GPTQ 64 channels on avx512, 32 on avx2 / portable; AWQ 128 / 64)
    // plus a partial one, at batch 1, 2, 4, 6 (the in-register kernels) and 12 (the GEMM path).
    packedIntCase("gptq 4-bit, 1 row, 136 outputs, group 128 (full cpu panels + a partial one)", "gptq", 4, 1, 136, 256, 2, rng, { bias: "float32" }),
    packedIntCase("gptq 4-bit act-order, 6 rows, 128 outputs", "gptq", 4, 6, 128, 64, 4, rng, { permuted: true }),
    packedIntCase("gptq 8-bit, 2 rows, 72 outputs, 2 groups", "gptq", 8, 2, 72, 64, 2, rng),
    packedIntCase("gptq 8-bit, 12 rows, 64 outputs (GEMM path)", "gptq", 8, 12, 64, 32, 1, rng),
    packedIntCase("awq 4-bit, 1 row, 136 outputs, bfloat16 bias", "awq", 4, 1, 136, 64, 2, rng, { bias: "bfloat16" }),
    packedIntCase("awq 4-bit, 4 rows, 128 outputs", "awq", 4, 4, 128, 32, 1, rng),
    packedIntCase("awq 4-bit, 12 rows, 128 outputs (GEMM path)", "awq", 4, 12, 128, 64, 2, rng),
    fp8Case("fp8 [1 row, 20 x 300], blocks [16, 128] (vector body + tail per block)", 1, 20, 300, [16, 128], rng),
    fp8Case("fp8 [4 rows, 17 x 96], blocks [8, 48]", 4, 17, 96, [8, 48], rng, "float32"),
    fp8Case("fp8 [9 rows, 70 x 64], blocks [32, 32] (GEMM path)", 9, 70, 64, [32, 32], rng),
    fp8Case("fp8 [1 row, 40 x 64], blocks [16, 32] (partial edge block)", 1, 40, 64, [16, 32], rng, "float32"),
    fp8Case("fp8 [7 rows, 130 x 72], blocks [128, 128] (one block per column block)", 7, 130, 72, [128, 128], rng),
    fp8Case("fp8 [3 rows, 9 x 20], blocks [4, 8]", 3, 9, 20, [4, 8], rng),
  ];
}
