/**
 * Conformance cases of block-quantized weights (llama.cpp q8_0 / q4_0 layouts, float32 scales):
 * quantizeBlocks on weights whose blocks quantize exactly (codes × a power of two), and
 * linearQuantized against a float64 product of the weight codes with the activations quantized to
 * int8 blocks as the kernels do (llama.cpp's q8_0 activations). cpu-only kernels
 * (Case.kernel): other devices list these cases as not run.
 */
import * as T from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { exact, floats, input, Rng, ulps, type Case } from "../case.js";
import { EXACT, host } from "../reference.js";
import { words } from "./quant.js";

/** Random codes of a [N, K] weight: bytes of the payload and the integer value of every element. */
function randomCodes(bits: 4 | 8, N: number, K: number, rng: Rng): { bytes: number[]; codes: number[] } {
  const codes = Array.from({ length: N * K }, () => (bits === 8 ? rng.int(-127, 128) : rng.int(-8, 8)));
  return { bytes: pack(bits, codes, N, K), codes };
}

/** The payload bytes of integer codes [N, K] (int4: nibble = code + 8, element j and j + 16 share byte j). */
function pack(bits: 4 | 8, codes: number[], N: number, K: number): number[] {
  if (bits === 8) return codes.map((c) => c & 0xff);
  const bytes: number[] = [];
  for (let b = 0; b < (N * K) / 32; b++) {
    for (let j = 0; j < 16; j++) bytes.push((codes[b * 32 + j] + 8) | ((codes[b * 32 + j + 16] + 8) << 4));
  }
  return bytes;
}

/** Round half to even (the vector conversions' rounding). */
function roundEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v - Math.trunc(v)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * Row m of x [M, K] quantized as the cpu kernels quantize activations (llama.cpp's q8_0 of the
 * activations): per block of 32, d = max|x| / 127 and code = x * (127 / max|x|) rounded to nearest
 * even, all in float32.
 */
function quantizeActivations(xs: number[], M: number, K: number): { codes: number[]; d: number[] } {
  const codes: number[] = [], d: number[] = [];
  for (let b = 0; b < (M * K) / 32; b++) {
    const block = xs.slice(b * 32, b * 32 + 32);
    const amax = Math.max(...block.map(Math.abs));
    d.push(Math.fround(amax / 127));
    const id = amax !== 0 ? Math.fround(127 / amax) : 0;
    for (const v of block) codes.push(roundEven(Math.fround(v * id)));
  }
  return { codes, d };
}

/**
 * A random [N, K] weight of `bits` (codes, scales, optional bias) and the product of x's rows with
 * it as the cpu kernels compute it: per block an exact integer sum of int8 activation codes times
 * the weight codes, times float32(d_w * d_a), summed in float64 (with TSORCH_CPU_INT8=off, the
 * kernels' float path: float32 activations times the dequantized weight). values/mag [M, N].
 */
function quantizedProduct(bits: 4 | 8, x: number[], M: number, N: number, K: number, rng: Rng, biasDtype: "float32" | "bfloat16" | null) {
  const { bytes, codes } = randomCodes(bits, N, K, rng);
  const scales = Array.from({ length: (N * K) / 32 }, () => rng.uniform(0.001, 0.05));
  const bias = biasDtype ? rng.tensor([N], -1, 1, biasDtype) : null;
  const bs = bias ? (bias.values as number[]) : null;
  // TSORCH_CPU_INT8=off: the float path (activations kept float32): codes are the values, d = 1.
  const floatPath = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.TSORCH_CPU_INT8 === "off";
  const act = floatPath ? { codes: x, d: new Array<number>((M * K) / 32).fill(1) } : quantizeActivations(x, M, K);
  const values: number[] = [], mag: number[] = [];
  for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
    let s = bs ? bs[n] : 0, g = Math.abs(s);
    for (let b = 0; b < K / 32; b++) {
      let isum = 0, iabs = 0;
      for (let j = 0; j < 32; j++) {
        const p = act.codes[m * K + b * 32 + j] * codes[n * K + b * 32 + j];
        isum += p;
        iabs += Math.abs(p);
      }
      const d = floatPath ? scales[(n * K) / 32 + b] : Math.fround(scales[(n * K) / 32 + b] * act.d[(m * K) / 32 + b]);
      s += isum * d;
      g += iabs * d;
    }
    values.push(s);
    mag.push(g);
  }
  const q = input(host("int32", [N, (K * bits) / 32], words(bytes))), s = input(host("float32", [N, K / 32], scales));
  return { q, s, bias: bias ? input(bias) : null, values, mag };
}

/** linearQuantized against quantizedProduct. `lead`: the input's leading dims (default [M]); the output keeps them ([...lead, N]). */
function linearQuantizedCase(name: string, bits: 4 | 8, M: number, N: number, K: number, rng: Rng, biasDtype: "float32" | "bfloat16" | null, lead = [M]): Case {
  const x = rng.tensor([...lead, K]);
  const r = quantizedProduct(bits, x.values as number[], M, N, K, rng, biasDtype);
  const inputs = [input(x), r.q, r.s];
  if (r.bias) inputs.push(r.bias);
  return {
    op: "linearQuantized", name, kernel: "linearQuantized", inputs,
    run: ([a, q, s, b]: Tensor[]) => T.linearQuantized(a, q, s, bits, b ?? null),
    expect: [floats("float32", [...lead, N], r.values, r.mag)],
    tol: ulps(4 + Math.ceil(Math.sqrt(K))),
  };
}

/** linearQuantizedGroup of one input with weights of `Ns` outputs (a bias on the second) against quantizedProduct. */
function linearQuantizedGroupCase(name: string, bits: 4 | 8, M: number, Ns: number[], K: number, rng: Rng): Case {
  const x = rng.tensor([M, K]);
  const rs = Ns.map((N, i) => quantizedProduct(bits, x.values as number[], M, N, K, rng, i === 1 ? "float32" : null));
  return {
    op: "linearQuantizedGroup", name, kernel: "linearQuantizedGroup",
    inputs: [input(x), ...rs.flatMap((r) => (r.bias ? [r.q, r.s, r.bias] : [r.q, r.s]))],
    run: ([a, ...ws]: Tensor[]) => {
      let i = 0;
      return T.linearQuantizedGroup(a, rs.map((r) => ({ q: ws[i++], scales: ws[i++], bits, bias: r.bias ? ws[i++] : null })));
    },
    expect: rs.map((r, i) => floats("float32", [M, Ns[i]], r.values, r.mag)),
    tol: ulps(4 + Math.ceil(Math.sqrt(K))),
  };
}

/** A weight whose every block quantizes exactly: codes × 2^e per block, one code at the extreme. */
function quantizeCase(name: string, bits: 4 | 8, N: number, K: number, rng: Rng): Case {
  const { codes } = randomCodes(bits, N, K, rng);
  const scales: number[] = [];
  for (let b = 0; b < (N * K) / 32; b++) {
    codes[b * 32 + rng.int(0, 32)] = bits === 8 ? (rng.int(0, 2) ? 127 : -127) : -8;
    scales.push(2 ** rng.int(-12, 3));
  }
  const w = codes.map((c, i) => c * scales[i >> 5]);
  return {
    op: "quantizeBlocks", name, kernel: "quantizeBlocks",
    inputs: [input(host("float32", [N, K], w))],
    run: ([a]: Tensor[]) => { const r = T.quantizeBlocks(a, bits); return [r.q, r.scales]; },
    expect: [exact(host("int32", [N, (K * bits) / 32], words(pack(bits, codes, N, K)))), exact(host("float32", [N, K / 32], scales))],
    tol: EXACT,
  };
}

export function blockQuantCases(): Case[] {
  const rng = new Rng(14);
  return [
    quantizeCase("int8: 3 rows of 2 blocks", 8, 3, 64, rng),
    quantizeCase("int4: 5 rows of 3 blocks", 4, 5, 96, rng),
    {
      op: "quantizeBlocks", name: "K not a multiple of 32 throws", kernel: "quantizeBlocks",
      inputs: [input(rng.tensor([2, 40]))], run: ([a]: Tensor[]) => T.quantizeBlocks(a, 8).q, expect: { throws: "RangeError" }, tol: EXACT,
    },
    linearQuantizedCase("int8, 1 row (decode), K=64, float32 bias", 8, 1, 40, 64, rng, "float32"),
    linearQuantizedCase("int4, 3 rows, K=96, bfloat16 bias", 4, 3, 33, 96, rng, "bfloat16"),
    linearQuantizedCase("int8, 20 rows (prefill), 70 outputs", 8, 20, 70, 64, rng, null),
    linearQuantizedCase("int4, 9 rows (prefill), 130 outputs", 4, 9, 130, 32, rng, null),
    linearQuantizedCase("int4, 8 rows, K=256", 4, 8, 17, 256, rng, null),
    linearQuantizedCase("int8, 6 rows, K=160 (odd block count)", 8, 6, 11, 160, rng, "float32"),
    linearQuantizedCase("int8, [2, 3, K] input (leading dims kept)", 8, 6, 5, 64, rng, null, [2, 3]),
    // Decode (1 row): odd row counts, an odd block count.
    linearQuantizedCase("int8, 1 row, K=160 (odd block count), 31 outputs, float32 bias", 8, 1, 31, 160, rng, "float32"),
    linearQuantizedCase("int4, 1 row, K=224, 77 outputs", 4, 1, 77, 224, rng, null),
    // 4 rows and more take the GEMM over repacked 16-row panels where the host has one (avx512-vnni).
    linearQuantizedCase("int4, 13 rows, K=96 (odd block count), 45 outputs, bfloat16 bias", 4, 13, 45, 96, rng, "bfloat16"),
    // avx512-vnni decodes int4 four blocks (one 64-byte line) at a time, one row of W at a time over
    // 2 accumulators: full lines plus a 1-3 block tail, 2 and 3 rows. avx2 / avx-vnni decode it two
    // blocks (32 bytes) at a time: K = 288, 160 and 32 here and 96 and 224 above end in a one-block
    // tail; K = 448 (7 steps) covers the odd step before it.
    linearQuantizedCase("int4, 1 row, K=1024 (whole lines), 9 outputs, float32 bias", 4, 1, 9, 1024, rng, "float32"),
    linearQuantizedCase("int4, 1 row, K=288 (2 lines + 1 block), 6 outputs", 4, 1, 6, 288, rng, null),
    linearQuantizedCase("int4, 2 rows, K=160 (1 line + 1 block), 7 outputs", 4, 2, 7, 160, rng, null),
    linearQuantizedCase("int4, 3 rows, K=448 (3 lines + 2 blocks), 8 outputs, float32 bias", 4, 3, 8, 448, rng, "float32"),
    linearQuantizedCase("int4, 1 row, K=32 (1 block), 5 outputs", 4, 1, 5, 32, rng, null),
    // Whole rounds of 4 steps plus 1-3 more and a tail (int4 on avx512-vnni: 5 lines + 2 blocks;
    // int8: 5 64-byte steps + 1 block, or 11 32-byte steps).
    linearQuantizedCase("int4, 1 row, K=704 (5 lines + 2 blocks), 10 outputs, float32 bias", 4, 1, 10, 704, rng, "float32"),
    linearQuantizedCase("int8, 1 row, K=352 (5 steps + 1 block), 7 outputs", 8, 1, 7, 352, rng, null),
    // A short K, whose activation rows are spaced for int4's longer layout (avx512-vnni: K = 64, 128;
    // avx2 / avx-vnni: K = 32): 2-3 rows, and 5 rows on the paths without a GEMM (avx2 / avx-vnni).
    linearQuantizedCase("int8, 2 rows, K=64, 9 outputs", 8, 2, 9, 64, rng, null),
    linearQuantizedCase("int8, 3 rows, K=128, 10 outputs, float32 bias", 8, 3, 10, 128, rng, "float32"),
    linearQuantizedCase("int8, 2 rows, K=32, 8 outputs", 8, 2, 8, 32, rng, null),
    linearQuantizedCase("int8, 5 rows, K=32, 7 outputs, float32 bias", 8, 5, 7, 32, rng, "float32"),
    // One row of whole lines, K = 128, 256, .., 1024: avx512-vnni holds the activation codes in
    // registers for every row of W, 4 lines (16 blocks) at a time: 1, 3, 5, 7 and 8 lines take
    // one group of 1 or 3 lines (its scales in one masked vector), two groups with a second of 1
    // or 3 lines, and two whole groups; K = 1152 is past that and takes the kernel of the cases above.
    linearQuantizedCase("int4, 1 row, K=128 (1 line), 19 outputs, float32 bias", 4, 1, 19, 128, rng, "float32"),
    linearQuantizedCase("int4, 1 row, K=384 (3 lines), 11 outputs", 4, 1, 11, 384, rng, null),
    linearQuantizedCase("int4, 1 row, K=640 (5 lines), 6 outputs, bfloat16 bias", 4, 1, 6, 640, rng, "bfloat16"),
    linearQuantizedCase("int4, 1 row, K=896 (7 lines), 70 outputs", 4, 1, 70, 896, rng, null),
    linearQuantizedCase("int4, 1 row, K=1024 (8 lines), 33 outputs, float32 bias", 4, 1, 33, 1024, rng, "float32"),
    linearQuantizedCase("int4, 1 row, K=1152 (9 lines), 5 outputs", 4, 1, 5, 1152, rng, null),
    // K = 0: an empty product, the output is the bias (or zero).
    linearQuantizedCase("int4, 1 row, K=0, 5 outputs, float32 bias", 4, 1, 5, 0, rng, "float32"),
    linearQuantizedCase("int8, 2 rows, K=0, 3 outputs, bfloat16 bias", 8, 2, 3, 0, rng, "bfloat16"),
    // 2-3 rows (int8 on every tier): 2 accumulators per row, rounds plus a remainder and a tail.
    linearQuantizedCase("int8, 2 rows, K=352, 9 outputs, float32 bias", 8, 2, 9, 352, rng, "float32"),
    linearQuantizedCase("int8, 3 rows, K=416 (6 64-byte steps + 1 block, 13 32-byte steps), 5 outputs", 8, 3, 5, 416, rng, null),
    // One call for the linears that share an input (decode's q/k/v, gate/up): uneven row counts, a bias.
    linearQuantizedGroupCase("int4 group of 3, 1 row, K=288, 50/7/25 outputs", 4, 1, [50, 7, 25], 288, rng),
    linearQuantizedGroupCase("int8 group of 2, 1 row, K=160, 30/49 outputs", 8, 1, [30, 49], 160, rng),
    linearQuantizedGroupCase("int4 group of 2, 1 row, K=512 (whole lines), 40/24 outputs", 4, 1, [40, 24], 512, rng),
    linearQuantizedGroupCase("int4 group of 2, 3 rows, K=96", 4, 3, [9, 26], 96, rng),
    linearQuantizedGroupCase("int4 group of 3, 1 row, K=0 (the bias, zeros)", 4, 1, [3, 4, 2], 0, rng),
    linearQuantizedGroupCase("int8 group of 3, 6 rows (GEMM sizes), K=64", 8, 6, [5, 17, 3], 64, rng),
  ];
}
