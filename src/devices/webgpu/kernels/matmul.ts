/**
 * Matrix products: linear (x @ w^T + bias, weights read as stored in float32/float16/bfloat16),
 * linearAdd (linear plus a residual, compile's epilogue fusion), gatherLinear (a weight per row, for mixture-of-experts) and batched strided matmul, all on one
 * tiled kernel: a workgroup computes a 64x64 output tile, staging 64x16 slices of both operands in
 * workgroup memory; each of its 256 threads accumulates a 4x4 register block with vec4 FMAs.
 * linear and linearAdd with up to 8 rows use a matrix-vector kernel, and with up to 64 rows
 * (batched decoding) the skinny kernel of ./skinny.ts.
 *
 * gatherLinear: when the experts' weights are slices of one buffer (nn's SparseMoeBlock stacks
 * them), one grouped pass for all experts (./grouped.ts: rows sorted by expert on the GPU, then one
 * GEMM over every expert's row tiles). Otherwise the tiled kernel runs once per expert with a row
 * filter (rows routed elsewhere are not written; a tile with no row of that expert exits at once).
 * Either way routing never leaves the GPU.
 */
import type { KernelSignatures } from "../../kernels.js";
import type { DType } from "../../dtype.js";
import type { TensorView } from "../../view.js";
import { STATUS_GATHER_LINEAR } from "../device.js";
import { bufferOf, deviceOf } from "./common.js";
import { elementwiseKernels } from "./elementwise.js";
import { expertStride, groupedGatherLinear } from "./grouped.js";
import { fitsSkinny, skinnyLinear } from "./skinny.js";
import { binding, LIBRARY, loader } from "./wgsl.js";

const T = 64;
const TK = 16;

interface Operand {
  tensor: TensorView;
  /** Strides in elements for (batch, row, col) of the logical matrix. */
  strides: [number, number, number];
}

/** Rows of one expert: only rows m with idx[m] == expert are written (gatherLinear). */
interface Route {
  idx: TensorView;
  expert: number;
  experts: number;
}

/** WGSL for a routed gemm: the expert of row m (an index out of range is reported and its row zeroed by expert 0). */
const ROUTE = /* wgsl */ `
@group(0) @binding(5) var<storage, read> IDX: array<u32>;
@group(0) @binding(6) var<storage, read_write> status: array<atomic<u32>>;
var<workgroup> hit: atomic<u32>;
var<workgroup> hit_any: u32;
fn expert_of(m: u32) -> u32 {
  let at = 2u * (pu(13u) + m);
  let lo = IDX[at]; let hi = IDX[at + 1u];
  if (hi != 0u || lo >= pu(15u)) {
    if (pu(14u) == 0u && atomicExchange(&status[0], ${STATUS_GATHER_LINEAR}u) == 0u) {
      atomicStore(&status[1], lo); atomicStore(&status[2], hi); atomicStore(&status[3], pu(15u));
    }
    return 0xffffffffu;
  }
  return lo;
}
`;

/**
 * out[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (+ bias[n]). A is float32; B and bias any float
 * dtype; out contiguous [batch, M, N] float32. `kFastB`: B's k stride is 1 (load its tiles along k).
 */
function gemm(a: Operand, b: Operand, bias: TensorView | null, out: TensorView, batch: number, M: number, N: number, K: number, route: Route | null = null): void {
  const dev = deviceOf(out);
  if (batch > 65535) throw new RangeError(`webgpu: matmul batch ${batch} exceeds 65535`);
  const bd: DType = b.tensor.dtype;
  const kFastB = b.strides[1] === 1;
  const key = `gemm:${bd}:${bias ? bias.dtype : "-"}:${kFastB ? "k" : "n"}:${route ? "routed" : "-"}`;
  const access = ["read", "read", "read", "write", ...(route ? ["read", "write"] as const : [])] as const;
  const prog = dev.dispatcher.program(key, access, () => `${LIBRARY}${route ? ROUTE : ""}
@group(0) @binding(1) var<storage, read> A: array<f32>;
${binding(2, "b", "read")}${loader("b", bd)}
${binding(3, "bias", "read")}${loader("bias", bias?.dtype ?? "float32")}
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
var<workgroup> As: array<f32, ${T * TK}>;
var<workgroup> Bs: array<f32, ${T * TK}>;
@compute @workgroup_size(256) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let M = pu(0u); let N = pu(1u); let K = pu(2u);
  let m0 = wid.y * ${T}u; let n0 = wid.x * ${T}u; let bat = wid.z;
  let abase = pu(3u) + bat * pu(4u);
  let bbase = pu(7u) + bat * pu(8u);
  let tx = lid % 16u; let ty = lid / 16u;${route ? `
  if (lid < ${T}u && m0 + lid < M) {
    let e = expert_of(m0 + lid);
    if (e == pu(14u) || (e == 0xffffffffu && pu(14u) == 0u)) { atomicOr(&hit, 1u); }
  }
  workgroupBarrier();
  if (lid == 0u) { hit_any = atomicLoad(&hit); }
  if (workgroupUniformLoad(&hit_any) == 0u) { return; }` : ""}
  var acc: array<vec4<f32>, 4>;
  for (var k0 = 0u; k0 < K; k0 = k0 + ${TK}u) {
    for (var r = 0u; r < 4u; r = r + 1u) {
      let e = lid + r * 256u;
      let mm = e / ${TK}u; let ka = e % ${TK}u;
      var av = 0.0;
      if (m0 + mm < M && k0 + ka < K) { av = A[abase + (m0 + mm) * pu(5u) + (k0 + ka) * pu(6u)]; }
      As[ka * ${T}u + mm] = av;
      ${kFastB ? `let nn = e / ${TK}u; let kb = e % ${TK}u;` : `let kb = e / ${T}u; let nn = e % ${T}u;`}
      var bv = 0.0;
      if (n0 + nn < N && k0 + kb < K) { bv = ld_b(bbase + (k0 + kb) * pu(9u) + (n0 + nn) * pu(10u)); }
      Bs[kb * ${T}u + nn] = bv;
    }
    workgroupBarrier();
    for (var k = 0u; k < ${TK}u; k = k + 1u) {
      let bv = vec4<f32>(Bs[k * ${T}u + tx * 4u], Bs[k * ${T}u + tx * 4u + 1u], Bs[k * ${T}u + tx * 4u + 2u], Bs[k * ${T}u + tx * 4u + 3u]);
      for (var i = 0u; i < 4u; i = i + 1u) { acc[i] = fma(vec4<f32>(As[k * ${T}u + ty * 4u + i]), bv, acc[i]); }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i = i + 1u) {
    let m = m0 + ty * 4u + i;
    if (m >= M) { break; }${route ? `
    let e = expert_of(m);
    if (e != pu(14u) && !(e == 0xffffffffu && pu(14u) == 0u)) { continue; }` : ""}
    for (var j = 0u; j < 4u; j = j + 1u) {
      let n = n0 + tx * 4u + j;
      if (n >= N) { break; }
      var y = ${route ? "select(0.0, acc[i][j], e != 0xffffffffu)" : "acc[i][j]"};
      ${bias ? "y = y + ld_bias(pu(11u) + n);" : ""}
      Y[pu(12u) + (bat * M + m) * N + n] = y;
    }
  }
}`);
  const [as0, as1, as2] = a.strides, [bs0, bs1, bs2] = b.strides;
  const buffers = [bufferOf(a.tensor), bufferOf(b.tensor), bufferOf(bias ?? a.tensor), bufferOf(out)];
  const params = [M, N, K, a.tensor.offset, as0, as1, as2, b.tensor.offset, bs0, bs1, bs2, bias?.offset ?? 0, out.offset];
  if (route) {
    buffers.push(bufferOf(route.idx), dev.status);
    params.push(route.idx.offset, route.expert, route.experts);
  }
  dev.dispatcher.dispatch(prog, buffers, params, [Math.ceil(N / T), Math.ceil(M / T), batch]);
}

/** Rows up to which linear uses the matrix-vector kernel. */
const GEMV_ROWS = 8;

/**
 * Linear for few rows (decoding): one thread per output column n, holding all M (<= GEMV_ROWS)
 * dot products, so each weight element is read once and no workgroup barrier is needed. Weights
 * are read a word or more at a time where alignment allows: float32 as vec4 (K and offsets
 * divisible by 4), float16/bfloat16 as pairs (K and offset even).
 */
function gemv(x: TensorView, w: TensorView, bias: TensorView | null, out: TensorView, M: number, N: number, K: number, residual: TensorView | null = null): void {
  const dev = deviceOf(out);
  const half = w.dtype !== "float32";
  const mode = !half && K % 4 === 0 && w.offset % 4 === 0 && x.offset % 4 === 0 ? "v4" : half && K % 2 === 0 && w.offset % 2 === 0 ? "pair" : "scalar";
  const unpack = w.dtype === "bfloat16"
    ? "vec2<f32>(bitcast<f32>(wv << 16u), bitcast<f32>(wv & 0xffff0000u))"
    : "vec2<f32>(f16_to_f32(wv & 0xffffu), f16_to_f32(wv >> 16u))";
  const loops: Record<typeof mode, string> = {
    v4: `let K4 = K / 4u;
  let wb = pu(4u) / 4u + n * K4;
  let xb = pu(3u) / 4u;
  for (var k = 0u; k < K4; k = k + 1u) {
    let wv = W4[wb + k];
    for (var m = 0u; m < M; m = m + 1u) { acc[m] = acc[m] + dot(X4[xb + m * K4 + k], wv); }
  }`,
    pair: `let wb = pu(4u) / 2u + n * (K / 2u);
  for (var k = 0u; k < K / 2u; k = k + 1u) {
    let wv = w[wb + k];
    let ww = ${unpack};
    for (var m = 0u; m < M; m = m + 1u) {
      let xi = pu(3u) + m * K + 2u * k;
      acc[m] = fma(X[xi + 1u], ww.y, fma(X[xi], ww.x, acc[m]));
    }
  }`,
    scalar: `let wb = pu(4u) + n * K;
  for (var k = 0u; k < K; k = k + 1u) {
    let wv = ld_w(wb + k);
    for (var m = 0u; m < M; m = m + 1u) { acc[m] = fma(X[pu(3u) + m * K + k], wv, acc[m]); }
  }`,
  };
  const key = `gemv:${w.dtype}:${bias ? bias.dtype : "-"}:${mode}:${residual ? "res" : "-"}`;
  const access = residual ? ["read", "read", "read", "write", "read"] as const : ["read", "read", "read", "write"] as const;
  const prog = dev.dispatcher.program(key, [...access], () => `${LIBRARY}
${mode === "v4" ? `@group(0) @binding(1) var<storage, read> X4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> W4: array<vec4<f32>>;` : `@group(0) @binding(1) var<storage, read> X: array<f32>;
${binding(2, "w", "read")}${loader("w", w.dtype)}`}
${binding(3, "bias", "read")}${loader("bias", bias?.dtype ?? "float32")}
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
${residual ? "@group(0) @binding(5) var<storage, read> R: array<f32>;" : ""}
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let M = pu(0u); let N = pu(1u); let K = pu(2u);
  let n = gid.x;
  if (n >= N) { return; }
  var acc: array<f32, ${GEMV_ROWS}>;
  ${loops[mode]}
  for (var m = 0u; m < M; m = m + 1u) {
    Y[pu(6u) + m * N + n] = acc[m]${bias ? " + ld_bias(pu(5u) + n)" : ""}${residual ? " + R[pu(7u) + m * N + n]" : ""};
  }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(w), bufferOf(bias ?? x), bufferOf(out), ...(residual ? [bufferOf(residual)] : [])],
    [M, N, K, x.offset, w.offset, bias?.offset ?? 0, out.offset, residual?.offset ?? 0], [Math.ceil(N / 64), 1, 1]);
}

function linear(x: TensorView, w: TensorView, bias: TensorView | null, out: TensorView): void {
  const [M, K] = x.shape, N = w.shape[0];
  if (M <= GEMV_ROWS && N <= 65535 * 64) return gemv(x, w, bias, out, M, N, K);
  if (fitsSkinny(x, w, M, N, K)) return skinnyLinear(x, w, bias, out);
  gemm({ tensor: x, strides: [0, K, 1] }, { tensor: w, strides: [0, 1, K] }, bias, out, 1, M, N, K);
}

/** linear then + residual: one dispatch for up to SKINNY_ROWS rows (./skinny.ts), else the tiled product into scratch and an add. */
function linearAdd(x: TensorView, w: TensorView, bias: TensorView | null, residual: TensorView, out: TensorView): void {
  const [M, K] = x.shape, N = w.shape[0];
  if (M <= GEMV_ROWS && N <= 65535 * 64) return gemv(x, w, bias, out, M, N, K, residual);
  if (fitsSkinny(x, w, M, N, K)) return skinnyLinear(x, w, bias, out, residual);
  const dev = deviceOf(out), scratch = dev.allocate(M * N * 4);
  const strides = out.shape.map((_, d) => out.shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const y: TensorView = { storage: scratch, dtype: "float32", shape: out.shape, strides, offset: 0 };
  linear(x, w, bias, y);
  elementwiseKernels.binary("add", y, residual, out);
  dev.release(scratch);
}

function gatherLinear(x: TensorView, w: TensorView[], idx: TensorView, out: TensorView): void {
  const [M, K] = x.shape, N = w[0].shape[0];
  const stride = w.length <= 1024 ? expertStride(w) : null;
  if (stride !== null) return groupedGatherLinear(x, w, idx, out, stride);
  w.forEach((we, expert) => gemm({ tensor: x, strides: [0, K, 1] }, { tensor: we, strides: [0, 1, K] }, null, out, 1, M, N, K, { idx, expert, experts: w.length }));
}

function matmul(a: TensorView, b: TensorView, out: TensorView): void {
  const [batch, M, K] = a.shape, N = b.shape[2];
  gemm({ tensor: a, strides: a.strides as [number, number, number] }, { tensor: b, strides: b.strides as [number, number, number] }, null, out, batch, M, N, K);
}

export const matmulKernels: Pick<KernelSignatures, "linear" | "linearAdd" | "gatherLinear" | "matmul"> = { linear, linearAdd, gatherLinear, matmul };
