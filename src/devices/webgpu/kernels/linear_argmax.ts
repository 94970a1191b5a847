/**
 * linearArgmax (devices/kernels.ts): a greedy step's LM head and argmax as one dispatch. One
 * workgroup: each thread computes the logits of columns t, t + WG, … with linear_group.ts's
 * arithmetic (its RMS-norm prologue and vec4 dot products, so the logits are the ones the group
 * kernel would write) and keeps the best (value, column) per row; a tree over the workgroup then
 * picks reduce.ts's argmax (the first NaN, else the first maximum). Larger heads (more than
 * FUSED_MAX_MACS multiply-adds, where one workgroup would be slow), more than ROWS rows, and
 * shapes linearGroup's fused kernel does not take run linearGroup into scratch and reduce's argmax.
 */
import type { KernelSignatures, LinearGroupNorm } from "../../kernels.js";
import { isContiguous, type TensorView } from "../../view.js";
import { fbits } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { linearGroupKernels, NORM_WEIGHT_SOURCE, ROW_NORMS_SOURCE } from "./linear_group.js";
import { reduceKernels } from "./reduce.js";
import { binding, LIBRARY, loader } from "./wgsl.js";

const WG = 64;
/** Rows up to which the fused kernel runs (linear_group.ts's ROWS). */
const ROWS = 8;
/** N * K up to which one workgroup computes the whole head. */
export const FUSED_MAX_MACS = 1 << 20;
const NONE = "0xffffffffu";

function linearArgmax(x: TensorView, norm: LinearGroupNorm | null, w: TensorView, out: TensorView): void {
  const [M, K] = x.shape, N = w.shape[0];
  const fast = M <= ROWS && K % 4 === 0 && x.offset % 4 === 0 && isContiguous(x) && N * K <= FUSED_MAX_MACS
    && w.dtype === "float32" && w.offset % 4 === 0 && isContiguous(w);
  if (!fast) return unfused(x, norm, w, out);
  const dev = deviceOf(out);
  const xv = norm ? "X4[xb + m * K4 + k] * r[m] * gv" : "X4[xb + m * K4 + k]";
  const prog = dev.dispatcher.program(`linear_argmax:${norm ? `norm:${norm.weight.dtype}` : "-"}`, ["read", "read", "read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X4: array<vec4<f32>>;
${binding(2, "g", "read")}${loader("g", norm?.weight.dtype ?? "float32")}
@group(0) @binding(3) var<storage, read> W: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> Y: array<u32>;
struct Arg { v: f32, i: u32 }
var<workgroup> best: array<Arg, ${ROWS * WG}>;
fn better(a: Arg, b: Arg) -> bool {
  if (b.i == ${NONE}) { return false; }
  if (a.i == ${NONE}) { return true; }
  let an = is_nan(a.v); let bn = is_nan(b.v);
  if (an || bn) { return bn && (!an || b.i < a.i); }
  return b.v > a.v || (!(a.v > b.v) && b.i < a.i);
}
${NORM_WEIGHT_SOURCE}
@compute @workgroup_size(${WG}) fn main(@builtin(local_invocation_index) t: u32) {
  let M = pu(0u); let K = pu(1u); let K4 = K / 4u; let N = pu(6u);
  let xb = pu(2u) / 4u;
  var r: array<f32, ${ROWS}>;
  ${norm ? ROW_NORMS_SOURCE : ""}
  var b: array<Arg, ${ROWS}>;
  for (var m = 0u; m < ${ROWS}u; m = m + 1u) { b[m] = Arg(0.0, ${NONE}); }
  for (var n = t; n < N; n = n + ${WG}u) {
    var acc: array<f32, ${ROWS}>;
    for (var m = 0u; m < M; m = m + 1u) { acc[m] = 0.0; }
    let wb = pu(7u) / 4u + n * K4;
    for (var k = 0u; k < K4; k = k + 1u) {
      let wv = W[wb + k];
      ${norm ? "let gv = G4(k);" : ""}
      for (var m = 0u; m < M; m = m + 1u) { acc[m] = acc[m] + dot(${xv}, wv); }
    }
    for (var m = 0u; m < M; m = m + 1u) {
      let c = Arg(acc[m], n);
      if (better(b[m], c)) { b[m] = c; }
    }
  }
  for (var m = 0u; m < ${ROWS}u; m = m + 1u) { best[m * ${WG}u + t] = b[m]; }
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (t < s) {
      for (var m = 0u; m < M; m = m + 1u) {
        let c = best[m * ${WG}u + t + s];
        if (better(best[m * ${WG}u + t], c)) { best[m * ${WG}u + t] = c; }
      }
    }
    workgroupBarrier();
  }
  if (t == 0u) {
    for (var m = 0u; m < M; m = m + 1u) {
      Y[2u * (pu(8u) + m)] = best[m * ${WG}u].i;
      Y[2u * (pu(8u) + m) + 1u] = 0u;
    }
  }
}`);
  const params = [M, K, x.offset, norm?.weight.offset ?? 0, fbits(norm?.eps ?? 0), fbits(norm?.offset ?? 0), N, w.offset, out.offset];
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(norm?.weight ?? x), bufferOf(w), bufferOf(out)], params, [1, 1, 1]);
}

/** The same as two kernels: the logits into scratch (linearGroup), then reduce's argmax. */
function unfused(x: TensorView, norm: LinearGroupNorm | null, w: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const [M] = x.shape, N = w.shape[0];
  const logits: TensorView = { storage: dev.allocate(M * N * 4), dtype: "float32", shape: [M, N], strides: [N, 1], offset: 0 };
  linearGroupKernels.linearGroup(x, norm, [w], [logits]);
  reduceKernels.reduce("argmax", logits, { ...out, shape: [M], strides: [1] });
  dev.release(logits.storage);
}

export const linearArgmaxKernels: Pick<KernelSignatures, "linearArgmax"> = { linearArgmax };
