/**
 * Image kernels: conv2d as an implicit GEMM (the tiled matmul's scheme, ./matmul.ts: a workgroup
 * computes a 64x64 tile of out[o, p] for one (sample, group), staging 64x16 slices of the weight
 * and of the input patches in workgroup memory, each of 256 threads holding a 4x4 block; patches
 * are read straight from the input, no im2col buffer), groupNorm (one workgroup per (sample,
 * group): mean, then variance of the deviations, then the affine normalisation) and nearest
 * upsampling (one thread per output element, PyTorch's float32 index rule).
 */
import type { Conv2dParams, KernelSignatures } from "../../kernels.js";
import { numel, type TensorView } from "../../view.js";
import { fbits, grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { binding, entry, LIBRARY, loader, workgroupSum } from "./wgsl.js";

const T = 64;
const TK = 16;

function conv2d(x: TensorView, w: TensorView, bias: TensorView | null, out: TensorView, p: Conv2dParams): void {
  const dev = deviceOf(out);
  const [N, C, H, W] = x.shape, [O, Cg, kh, kw] = w.shape, [, , Ho, Wo] = out.shape;
  const G = p.groups, Og = O / G, K = Cg * kh * kw, P = Ho * Wo;
  if (N * G > 65535) throw new RangeError(`webgpu: conv2d over ${N} samples x ${G} groups exceeds 65535 workgroups`);
  const key = `conv2d:${w.dtype}:${bias ? bias.dtype : "-"}`;
  const prog = dev.dispatcher.program(key, ["read", "read", "read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
${binding(2, "w", "read")}${loader("w", w.dtype)}
${binding(3, "bias", "read")}${loader("bias", bias?.dtype ?? "float32")}
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
var<workgroup> As: array<f32, ${T * TK}>;
var<workgroup> Bs: array<f32, ${T * TK}>;
@compute @workgroup_size(256) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let M = pu(0u); let NP = pu(1u); let K = pu(2u);
  let H = pi(4u); let W = pi(5u); let Wo = pu(6u); let kw = pu(7u); let KK = pu(8u);
  let G = pu(15u); let Cg = pu(21u);
  let m0 = wid.y * ${T}u; let n0 = wid.x * ${T}u;
  let n = wid.z / G; let g = wid.z % G;
  let xbase = pu(17u) + (n * pu(3u) + g * Cg) * u32(H * W);
  let wbase = pu(18u) + g * M * K;
  let tx = lid % 16u; let ty = lid / 16u;
  var acc: array<vec4<f32>, 4>;
  for (var k0 = 0u; k0 < K; k0 = k0 + ${TK}u) {
    for (var r = 0u; r < 4u; r = r + 1u) {
      let e = lid + r * 256u;
      let mm = e / ${TK}u; let ka = e % ${TK}u;
      var av = 0.0;
      if (m0 + mm < M && k0 + ka < K) { av = ld_w(wbase + (m0 + mm) * K + k0 + ka); }
      As[ka * ${T}u + mm] = av;
      let kb = e / ${T}u; let nn = e % ${T}u;
      var bv = 0.0;
      let k = k0 + kb; let q = n0 + nn;
      if (q < NP && k < K) {
        let c = k / KK; let t = k % KK;
        let hi = i32((q / Wo) * pu(9u) + (t / kw) * pu(13u)) - pi(11u);
        let wi = i32((q % Wo) * pu(10u) + (t % kw) * pu(14u)) - pi(12u);
        if (hi >= 0 && hi < H && wi >= 0 && wi < W) { bv = X[xbase + c * u32(H * W) + u32(hi * W + wi)]; }
      }
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
    if (m >= M) { break; }
    let o = g * M + m;
    for (var j = 0u; j < 4u; j = j + 1u) {
      let q = n0 + tx * 4u + j;
      if (q >= NP) { break; }
      var y = acc[i][j];
      ${bias ? "y = y + ld_bias(pu(19u) + o);" : ""}
      Y[pu(20u) + (n * pu(16u) + o) * NP + q] = y;
    }
  }
}`);
  const params = [Og, P, K, C, H, W, Wo, kw, kh * kw, p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], G, O,
    x.offset, w.offset, bias?.offset ?? 0, out.offset, Cg];
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(w), bufferOf(bias ?? x), bufferOf(out)], params, [Math.ceil(P / T), Math.ceil(Og / T), N * G]);
}

const WG = 256;

function groupNorm(x: TensorView, w: TensorView | null, b: TensorView | null, out: TensorView, groups: number, eps: number): void {
  const dev = deviceOf(out);
  const [N, C, S] = x.shape, len = (C / groups) * S, rows = N * groups;
  const wd = w?.dtype ?? "float32", bd = b?.dtype ?? "float32";
  const prog = dev.dispatcher.program(`groupnorm:${w ? wd : "-"}:${b ? bd : "-"}`, ["read", "read", "read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
${binding(2, "w", "read")}${loader("w", wd)}${binding(3, "b", "read")}${loader("b", bd)}
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
${workgroupSum(WG, "R")}${entry(WG)} {
  let row = group_id(wid, nwg);
  if (row >= pu(0u)) { return; }
  let len = pu(1u); let S = pu(2u);
  let c0 = (row % pu(3u)) * (len / S);
  let xb = pu(4u) + row * len;
  let yb = pu(7u) + row * len;
  var s = 0.0;
  for (var j = lid; j < len; j = j + ${WG}u) { s = s + X[xb + j]; }
  let mean = row_sum(s, lid) / f32(len);
  var v = 0.0;
  for (var j = lid; j < len; j = j + ${WG}u) { let d = X[xb + j] - mean; v = v + d * d; }
  let r = 1.0 / sqrt(row_sum(v, lid) / f32(len) + pf(8u));
  for (var j = lid; j < len; j = j + ${WG}u) {
    let c = c0 + j / S;
    var y = (X[xb + j] - mean) * r;
    ${w ? "y = y * ld_w(pu(5u) + c);" : ""}
    ${b ? "y = y + ld_b(pu(6u) + c);" : ""}
    Y[yb + j] = y;
  }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(w ?? x), bufferOf(b ?? x), bufferOf(out)],
    [rows, len, S, groups, x.offset, w?.offset ?? 0, b?.offset ?? 0, out.offset, fbits(eps)], grid(rows, 1));
}

function upsampleNearest2d(x: TensorView, out: TensorView, scaleH: number, scaleW: number): void {
  const dev = deviceOf(out);
  const [, H, W] = x.shape, [, Ho, Wo] = out.shape;
  const prog = dev.dispatcher.program("upsample_nearest2d", ["read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
${entry(256)} {
  let i = group_id(wid, nwg) * 256u + lid;
  if (i >= pu(0u)) { return; }
  let H = pu(1u); let W = pu(2u); let Ho = pu(3u); let Wo = pu(4u);
  let wo = i % Wo; let ho = (i / Wo) % Ho; let bc = i / (Wo * Ho);
  let hi = min(u32(floor(f32(ho) * pf(5u))), H - 1u);
  let wi = min(u32(floor(f32(wo) * pf(6u))), W - 1u);
  Y[pu(8u) + i] = X[pu(7u) + (bc * H + hi) * W + wi];
}`);
  const n = numel(out);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(out)], [n, H, W, Ho, Wo, fbits(scaleH), fbits(scaleW), x.offset, out.offset], grid(n, 256));
}

export const spatialKernels: Pick<KernelSignatures, "conv2d" | "groupNorm" | "upsampleNearest2d"> = { conv2d, groupNorm, upsampleNearest2d };
