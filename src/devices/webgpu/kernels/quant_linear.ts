/**
 * Linear layers with quantized weights, dequantized in the shader: one thread per output element
 * (m, n) decodes row n of W along k and accumulates x[m, k] * w[n, k] in float32 (fma). Weights:
 * - block-quantized (linearQuantized: llama.cpp's q8_0 / q4_0 with float32 scales, the layout
 *   KernelSignatures.quantizeBlocks writes). As on the cpu (and in llama.cpp), the activations are
 *   quantized too, per row and block of 32 (d_a = max|x| / 127, codes rounded half to even): each
 *   block's sum of code products is exact in float32 and scaled by d_w * d_a;
 * - GPTQ / AWQ packed integer codes with zero points, scales and g_idx (linearPackedInt);
 * - FP8 e4m3 bytes with one scale per block (linearFp8Block).
 * Every packed tensor is bound as words (array<u32>); views are read at their element offsets.
 */
import type { KernelSignatures } from "../../kernels.js";
import { numel, type TensorView } from "../../view.js";
import { grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { binding, entry, LIBRARY, loader } from "./wgsl.js";

const WG = 64;

/** The float loop: acc = sum_k x[m, k] * w(n, k), `decode` being w(n, k). */
const floatLoop = (decode: string) => /* wgsl */ `
  for (var k = 0u; k < K; k = k + 1u) {
    acc = fma(bitcast<f32>(X[xb + k]), ${decode}, acc);
  }`;

/**
 * Run the shader whose `loop` (WGSL; floatLoop by default) accumulates row m of x times row n of
 * the weight into `acc`, reading bindings 2..5 and params from index 8 on: y[m, n] = acc + bias[n].
 * `operands` are bound at 2.. in order; their element offsets are params 8.. in the same order,
 * `extra` params follow.
 */
function quantLinear(key: string, loop: string, helpers: string, x: TensorView, operands: TensorView[],
                     bias: TensorView | null, out: TensorView, extra: number[]): void {
  const dev = deviceOf(out);
  // out may carry the input's leading dims ([..., N]); it holds M rows of N.
  const [M, K] = x.shape, N = M > 0 ? numel(out) / M : 0;
  const names = ["A", "B", "C", "D"].slice(0, operands.length);
  const prog = dev.dispatcher.program(`${key}:${bias?.dtype ?? "-"}`, ["read", ...operands.map(() => "read" as const), "read", "write"], () => `${LIBRARY}
${binding(1, "X", "read")}${names.map((n, i) => binding(2 + i, n, "read")).join("")}${binding(2 + names.length, "bias", "read")}${loader("bias", bias?.dtype ?? "float32")}
@group(0) @binding(${3 + names.length}) var<storage, read_write> Y: array<f32>;
${helpers}
${entry(WG)} {
  let i = group_id(wid, nwg) * ${WG}u + lid;
  let M = pu(0u); let N = pu(1u); let K = pu(2u);
  if (i >= M * N) { return; }
  let m = i / N; let n = i % N;
  let xb = pu(3u) + m * K;
  var acc = 0.0;${loop}
  if (pu(5u) != 0u) { acc = acc + ld_bias(pu(6u) + n); }
  Y[pu(4u) + i] = acc;
}`);
  const params = [M, N, K, x.offset, out.offset, bias ? 1 : 0, bias?.offset ?? 0, 0, ...operands.map((t) => t.offset), ...extra];
  dev.dispatcher.dispatch(prog, [bufferOf(x), ...operands.map(bufferOf), bufferOf(bias ?? x), bufferOf(out)], params, grid(M * N, WG));
}

/** A's byte `b` (A bound as words starting at element offset pu(8u)). */
const BYTE = /* wgsl */ `fn byte_a(b: u32) -> u32 { return (A[pu(8u) + b / 4u] >> ((b & 3u) * 8u)) & 0xffu; }`;

function linearQuantized(x: TensorView, q: TensorView, scales: TensorView, bits: 4 | 8, bias: TensorView | null, out: TensorView): void {
  const code = bits === 8 ? "f32(bitcast<i32>(byte_a(n * K + k) << 24u) >> 24u)" : "c4(n, k, K)";
  const helpers = `${BYTE}
fn c4(n: u32, k: u32, K: u32) -> f32 {
  let j = k % 32u;
  let byte = byte_a(n * (K / 2u) + (k / 32u) * 16u + (j & 15u));
  return f32(i32(select(byte >> 4u, byte & 15u, j < 16u)) - 8);
}`;
  const loop = /* wgsl */ `
  for (var b = 0u; b < K / 32u; b = b + 1u) {
    var amax = 0.0;
    for (var j = 0u; j < 32u; j = j + 1u) { amax = max(amax, abs(bitcast<f32>(X[xb + b * 32u + j]))); }
    let inv = select(0.0, 127.0 / amax, amax != 0.0);
    var isum = 0.0;
    for (var j = 0u; j < 32u; j = j + 1u) {
      let k = b * 32u + j;
      isum = isum + round(bitcast<f32>(X[xb + k]) * inv) * ${code};
    }
    acc = acc + isum * (bitcast<f32>(B[pu(9u) + n * (K / 32u) + b]) * (amax / 127.0));
  }`;
  quantLinear(`linearQuantized${bits}`, loop, helpers, x, [q, scales], bias, out, []);
}

function linearPackedInt(x: TensorView, qweight: TensorView, qzeros: TensorView, scales: TensorView, gIdx: TensorView,
                         bits: 4 | 8, awq: boolean, zeroOffset: 0 | 1, bias: TensorView | null, out: TensorView): void {
  const P = 32 / bits, mask = (1 << bits) - 1;
  // AutoAWQ packs columns 8c + [0, 2, 4, 6, 1, 3, 5, 7] into nibbles 0..7: column j is in nibble SLOT[j].
  const code = awq
    ? `(A[pu(8u) + k * (N / 8u) + n / 8u] >> (SLOT[n % 8u] * 4u)) & 15u`
    : `(A[pu(8u) + (k / ${P}u) * N + n] >> ((k % ${P}u) * ${bits}u)) & ${mask}u`;
  const zero = awq
    ? `(B[pu(9u) + g * (N / 8u) + n / 8u] >> (SLOT[n % 8u] * 4u)) & 15u`
    : `(B[pu(9u) + g * (N / ${P}u) + n / ${P}u] >> ((n % ${P}u) * ${bits}u)) & ${mask}u`;
  const helpers = `const SLOT = array<u32, 8>(0u, 4u, 1u, 5u, 2u, 6u, 3u, 7u);
fn wq(n: u32, k: u32, N: u32) -> f32 {
  let g = D[pu(11u) + k];
  let q = i32(${code});
  let z = i32(${zero}) + ${zeroOffset};
  return f32(q - z) * bitcast<f32>(C[pu(10u) + g * N + n]);
}`;
  quantLinear(`linearPackedInt:${awq ? "awq" : "gptq"}${bits}:${zeroOffset}`, floatLoop("wq(n, k, N)"), helpers, x, [qweight, qzeros, scales, gIdx], bias, out, []);
}

function linearFp8Block(x: TensorView, weight: TensorView, scaleInv: TensorView, blockN: number, blockK: number,
                        bias: TensorView | null, out: TensorView): void {
  // e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal; 0x7f is NaN.
  const helpers = `${BYTE}
fn e4m3(c: u32) -> f32 {
  if ((c & 0x7fu) == 0x7fu) { return nan_f(); }
  let e = (c >> 3u) & 15u;
  let m = f32(c & 7u);
  let v = select(ldexp(8.0 + m, i32(e) - 10), ldexp(m, -9), e == 0u);
  return select(v, -v, (c & 0x80u) != 0u);
}
fn wf(n: u32, k: u32, K: u32) -> f32 {
  let sk = (K + pu(11u) - 1u) / pu(11u);
  return e4m3(byte_a(n * K + k)) * bitcast<f32>(B[pu(9u) + (n / pu(10u)) * sk + k / pu(11u)]);
}`;
  quantLinear("linearFp8Block", floatLoop("wf(n, k, K)"), helpers, x, [weight, scaleInv], bias, out, [blockN, blockK]);
}

export const quantLinearKernels: Pick<KernelSignatures, "linearQuantized" | "linearPackedInt" | "linearFp8Block"> = {
  linearQuantized, linearPackedInt, linearFp8Block,
};
