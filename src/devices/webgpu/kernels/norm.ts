/**
 * Normalisation and rotary kernels: rmsNorm and layerNorm (one workgroup per row, weights in
 * any float dtype read as stored), rotary (one thread per element, rotate_half convention).
 */
import type { KernelSignatures } from "../../kernels.js";
import { numel, type TensorView } from "../../view.js";
import { fbits, grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { binding, entry, LIBRARY, loader, workgroupSum } from "./wgsl.js";

const WG = 64;

/** WGSL: a workgroup sum returning the same (uniform) value to every thread. */
const ROW_SUM = workgroupSum(WG);

/** A dummy binding for an absent optional tensor (any small buffer; never read). */
function orDummy(t: TensorView | null, other: TensorView): GPUBuffer {
  return bufferOf(t ?? other);
}

function rmsNorm(x: TensorView, w: TensorView, out: TensorView, eps: number, offset: number): void {
  const dev = deviceOf(out);
  const n = x.shape[x.shape.length - 1], rows = numel(x) / n;
  const prog = dev.dispatcher.program(`rmsnorm:${w.dtype}`, ["read", "read", "write"], () => `${LIBRARY}${ROW_SUM}
@group(0) @binding(1) var<storage, read> X: array<f32>;
${binding(2, "w", "read")}${loader("w", w.dtype)}
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
${entry(WG)} {
  let row = group_id(wid, nwg);
  if (row >= pu(0u)) { return; }
  let n = pu(1u);
  let xb = pu(2u) + row * n;
  let yb = pu(4u) + row * n;
  var ss = 0.0;
  for (var j = lid; j < n; j = j + ${WG}u) { let v = X[xb + j]; ss = ss + v * v; }
  let r = 1.0 / sqrt(row_sum(ss, lid) / f32(n) + pf(5u));
  for (var j = lid; j < n; j = j + ${WG}u) { Y[yb + j] = X[xb + j] * r * (pf(6u) + ld_w(pu(3u) + j)); }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(w), bufferOf(out)], [rows, n, x.offset, w.offset, out.offset, fbits(eps), fbits(offset)], grid(rows, 1));
}

function layerNorm(x: TensorView, w: TensorView | null, b: TensorView | null, out: TensorView, eps: number): void {
  const dev = deviceOf(out);
  const n = x.shape[x.shape.length - 1], rows = numel(x) / n;
  const wd = w?.dtype ?? "float32", bd = b?.dtype ?? "float32";
  const prog = dev.dispatcher.program(`layernorm:${w ? wd : "-"}:${b ? bd : "-"}`, ["read", "read", "read", "write"], () => `${LIBRARY}${ROW_SUM}
@group(0) @binding(1) var<storage, read> X: array<f32>;
${binding(2, "w", "read")}${loader("w", wd)}${binding(3, "b", "read")}${loader("b", bd)}
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
${entry(WG)} {
  let row = group_id(wid, nwg);
  if (row >= pu(0u)) { return; }
  let n = pu(1u);
  let xb = pu(2u) + row * n;
  let yb = pu(5u) + row * n;
  var s = 0.0;
  for (var j = lid; j < n; j = j + ${WG}u) { s = s + X[xb + j]; }
  let mean = row_sum(s, lid) / f32(n);
  var v = 0.0;
  for (var j = lid; j < n; j = j + ${WG}u) { let d = X[xb + j] - mean; v = v + d * d; }
  let r = 1.0 / sqrt(row_sum(v, lid) / f32(n) + pf(6u));
  for (var j = lid; j < n; j = j + ${WG}u) {
    var y = (X[xb + j] - mean) * r;
    ${w ? "y = y * ld_w(pu(3u) + j);" : ""}
    ${b ? "y = y + ld_b(pu(4u) + j);" : ""}
    Y[yb + j] = y;
  }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), orDummy(w, x), orDummy(b, x), bufferOf(out)],
    [rows, n, x.offset, w?.offset ?? 0, b?.offset ?? 0, out.offset, fbits(eps)], grid(rows, 1));
}

function rotary(x: TensorView, cos: TensorView, sin: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const [, , H, D] = x.shape;
  const R = cos.shape[2];
  const prog = dev.dispatcher.program("rotary", ["read", "read", "read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> C: array<f32>;
@group(0) @binding(3) var<storage, read> S: array<f32>;
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
${entry(256)} {
  let i = group_id(wid, nwg) * 256u + lid;
  if (i >= pu(0u)) { return; }
  let D = pu(1u);
  let R = pu(2u);
  let half = R / 2u;
  let d = i % D;
  let xi = pu(4u) + i;
  if (d >= R) { Y[pu(7u) + i] = X[xi]; return; }
  let k = (i / (D * pu(3u))) * R + d;
  let cs = C[pu(5u) + k];
  let sn = S[pu(6u) + k];
  if (d < half) { Y[pu(7u) + i] = X[xi] * cs - X[xi + half] * sn; }
  else { Y[pu(7u) + i] = X[xi] * cs + X[xi - half] * sn; }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(cos), bufferOf(sin), bufferOf(out)],
    [numel(x), D, R, H, x.offset, cos.offset, sin.offset, out.offset], grid(numel(x), 256));
}

export const normKernels: Pick<KernelSignatures, "rmsNorm" | "layerNorm" | "rotary"> = { rmsNorm, layerNorm, rotary };
