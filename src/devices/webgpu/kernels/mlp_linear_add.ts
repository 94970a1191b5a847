/**
 * linearGroupLinearAdd (devices/kernels.ts): a gated MLP as one dispatch. One workgroup per row:
 * its threads compute the row's hidden values as linear_group.ts's epilogue kernel does (the
 * RMS-norm prologue, every weight's column n, the chain of them, e.g. SiLU(gate) * up) into
 * workgroup memory, then the output columns as matmul.ts's vec4 gemv does (+ bias + residual).
 * Hidden rows wider than MAX_ROW floats, more multiply-adds per row than FUSED_MAX_MACS (one
 * workgroup per row would be slow), non-float32 weights and unaligned shapes run linearGroup into
 * scratch and linearAdd.
 */
import type { FusedStep, KernelSignatures, LinearGroupNorm } from "../../kernels.js";
import { isContiguous, type TensorView } from "../../view.js";
import { fbits } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { fusedExpr, fusedKey } from "./elementwise.js";
import { FUSED_MAX_MACS } from "./linear_argmax.js";
import { linearGroupKernels, NORM_WEIGHT_SOURCE } from "./linear_group.js";
import { matmulKernels } from "./matmul.js";
import { binding, LIBRARY, loader } from "./wgsl.js";

const WG = 64;
/** Most hidden floats of one row held in workgroup memory. */
const MAX_ROW = 4096;

const aligned = (v: TensorView) => v.dtype === "float32" && v.offset % 4 === 0 && isContiguous(v);

function linearGroupLinearAdd(x: TensorView, norm: LinearGroupNorm | null, ws: TensorView[], epilogue: readonly FusedStep[],
  w: TensorView, bias: TensorView | null, residual: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const [M, K] = x.shape, [I] = ws[0].shape, N = w.shape[0];
  const G = ws.length;
  const fast = G <= 3 && M <= 65535 && K % 4 === 0 && I % 4 === 0 && I <= MAX_ROW && w.shape[1] === I && x.offset % 4 === 0 && isContiguous(x)
    && ws.every((wi) => aligned(wi) && wi.shape[0] === I) && aligned(w) && (bias === null || bias.dtype === "float32")
    && G * I * K + N * I <= FUSED_MAX_MACS && dev.gpu.limits.maxStorageBuffersPerShaderStage >= 6 + G
    && dev.gpu.limits.maxComputeWorkgroupStorageSize >= 4 * MAX_ROW;
  if (!fast) return unfused(x, norm, ws, epilogue, w, bias, residual, out);
  const xv = norm ? "X4[xb + k] * r * gv" : "X4[xb + k]";
  const access = ["read", "read", ...ws.map(() => "read" as const), "read", "read", "read", "write"] as const;
  const prog = dev.dispatcher.program(`mlp_linear_add:${G}:${norm ? `norm:${norm.weight.dtype}` : "-"}:${fusedKey(epilogue)}:${bias ? "bias" : "-"}`, [...access], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X4: array<vec4<f32>>;
${binding(2, "g", "read")}${loader("g", norm?.weight.dtype ?? "float32")}
${ws.map((_, i) => `@group(0) @binding(${3 + i}) var<storage, read> W${i}: array<vec4<f32>>;`).join("\n")}
@group(0) @binding(${3 + G}) var<storage, read> D4: array<vec4<f32>>;
${binding(4 + G, "bias", "read")}${loader("bias", "float32")}
@group(0) @binding(${5 + G}) var<storage, read> R: array<f32>;
@group(0) @binding(${6 + G}) var<storage, read_write> Y: array<f32>;
var<workgroup> row: array<f32, ${MAX_ROW}>;
${NORM_WEIGHT_SOURCE}
@compute @workgroup_size(${WG}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m = wid.x;
  let K = pu(0u); let K4 = K / 4u; let I = pu(1u); let N = pu(2u);
  let xb = pu(6u) / 4u + m * K4;
  ${norm ? `var ss = 0.0;
  for (var k = 0u; k < K4; k = k + 1u) { let v = X4[xb + k]; ss = ss + dot(v, v); }
  let r = 1.0 / sqrt(ss / f32(K) + pf(4u));` : ""}
  for (var n = lid; n < I; n = n + ${WG}u) {
    ${ws.map((_, i) => `var acc${i} = 0.0;
    let wb${i} = pu(${7 + i}u) / 4u + n * K4;`).join("\n    ")}
    for (var k = 0u; k < K4; k = k + 1u) {
      ${norm ? "let gv = G4(k);" : ""}
      let xv = ${xv};
      ${ws.map((_, i) => `acc${i} = acc${i} + dot(xv, W${i}[wb${i} + k]);`).join("\n      ")}
    }
    row[n] = ${fusedExpr(epilogue, ws.map((_, i) => `acc${i}`))};
  }
  workgroupBarrier();
  let I4 = I / 4u;
  for (var n = lid; n < N; n = n + ${WG}u) {
    let wb = pu(10u) / 4u + n * I4;
    var acc = 0.0;
    for (var k = 0u; k < I4; k = k + 1u) {
      acc = acc + dot(vec4<f32>(row[4u * k], row[4u * k + 1u], row[4u * k + 2u], row[4u * k + 3u]), D4[wb + k]);
    }
    Y[pu(13u) + m * N + n] = acc${bias ? " + ld_bias(pu(11u) + n)" : ""} + R[pu(12u) + m * N + n];
  }
}`);
  const params = [K, I, N, norm?.weight.offset ?? 0, fbits(norm?.eps ?? 0), fbits(norm?.offset ?? 0), x.offset,
    ws[0].offset, ws[1]?.offset ?? 0, ws[2]?.offset ?? 0, w.offset, bias?.offset ?? 0, residual.offset, out.offset];
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(norm?.weight ?? x), ...ws.map(bufferOf), bufferOf(w), bufferOf(bias ?? w), bufferOf(residual), bufferOf(out)],
    params, [M, 1, 1]);
}

/** The same as two kernels: linearGroup (with its epilogue) into scratch, then linearAdd. */
function unfused(x: TensorView, norm: LinearGroupNorm | null, ws: TensorView[], epilogue: readonly FusedStep[],
  w: TensorView, bias: TensorView | null, residual: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const [M] = x.shape, [I] = ws[0].shape;
  const h: TensorView = { storage: dev.allocate(M * I * 4), dtype: "float32", shape: [M, I], strides: [I, 1], offset: 0 };
  linearGroupKernels.linearGroup(x, norm, ws, [h], epilogue);
  matmulKernels.linearAdd(h, w, bias, residual, out);
  dev.release(h.storage);
}

export const mlpLinearAddKernels: Pick<KernelSignatures, "linearGroupLinearAdd"> = { linearGroupLinearAdd };
