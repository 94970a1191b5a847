/**
 * pagedAttentionLinearAdd (devices/kernels.ts): paged attention, the output projection and the
 * residual add as one dispatch. One workgroup per query token: it runs paged_attention.ts's
 * per-head attention for every head in turn into workgroup memory (the token's [Hq * Dv] row),
 * then each thread computes output columns n, n + WG, … as matmul.ts's vec4 gemv does (+ bias +
 * residual). Rows wider than MAX_ROW floats, heads whose projection exceeds FUSED_MAX_MACS
 * multiply-adds (one workgroup per token would be slow), non-float32 weights, unaligned shapes and
 * devices allowing fewer than 10 storage bindings run pagedAttention into scratch and linearAdd.
 */
import type { KernelSignatures, PagedAttentionParams } from "../../kernels.js";
import { isContiguous, type TensorView } from "../../view.js";
import { fbits } from "../dispatch.js";
import { MAX_HEAD, WG } from "./attention.js";
import { bufferOf, deviceOf } from "./common.js";
import { FUSED_MAX_MACS } from "./linear_argmax.js";
import { matmulKernels } from "./matmul.js";
import { attendHead, pagedAttentionKernels } from "./paged_attention.js";
import { binding, LIBRARY, loader } from "./wgsl.js";

/** Most floats of one token's attention row (Hq * Dv) held in workgroup memory. */
const MAX_ROW = 2048;

function pagedAttentionLinearAdd(q: TensorView, kCache: TensorView, vCache: TensorView, tables: TensorView, seq: TensorView, pos: TensorView,
  p: PagedAttentionParams, w: TensorView, bias: TensorView | null, residual: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const [T, Hq] = q.shape, [, bs, Hkv] = kCache.shape, D = q.shape[2], Dv = vCache.shape[3];
  const [N, K] = w.shape;
  const fast = K === Hq * Dv && K <= MAX_ROW && K % 4 === 0 && N * K <= FUSED_MAX_MACS && T <= 65535
    && w.dtype === "float32" && w.offset % 4 === 0 && isContiguous(w) && (bias === null || bias.dtype === "float32")
    && Math.max(D, Dv) <= MAX_HEAD && kCache.dtype === "float32" && dev.gpu.limits.maxStorageBuffersPerShaderStage >= 10
    && dev.gpu.limits.maxComputeWorkgroupStorageSize >= 4 * (MAX_ROW + MAX_HEAD + 3 * WG);
  if (!fast) return unfused(q, kCache, vCache, tables, seq, pos, p, w, bias, residual, out);
  const prog = dev.dispatcher.program(`paged_attention_linear_add:${bias ? "bias" : "-"}`, ["read", "read", "read", "read", "read", "read", "read", "read", "read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> BT: array<i32>;
@group(0) @binding(5) var<storage, read> SEQ: array<i32>;
@group(0) @binding(6) var<storage, read> POS: array<i32>;
@group(0) @binding(7) var<storage, read> W4: array<vec4<f32>>;
${binding(8, "bias", "read")}${loader("bias", "float32")}
@group(0) @binding(9) var<storage, read> R: array<f32>;
@group(0) @binding(10) var<storage, read_write> Y: array<f32>;
var<workgroup> row: array<f32, ${MAX_ROW}>;
${attendHead((d, v) => `row[h * Dv + ${d}] = ${v};`)}
@compute @workgroup_size(${WG}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x;
  for (var h = 0u; h < pu(0u); h = h + 1u) { attend(t, h, lid); }
  workgroupBarrier();
  let N = pu(15u); let K4 = pu(20u) / 4u;
  for (var n = lid; n < N; n = n + ${WG}u) {
    let wb = pu(16u) / 4u + n * K4;
    var acc = 0.0;
    for (var k = 0u; k < K4; k = k + 1u) {
      acc = acc + dot(vec4<f32>(row[4u * k], row[4u * k + 1u], row[4u * k + 2u], row[4u * k + 3u]), W4[wb + k]);
    }
    Y[pu(19u) + t * N + n] = acc${bias ? " + ld_bias(pu(17u) + n)" : ""} + R[pu(18u) + t * N + n];
  }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(q), bufferOf(kCache), bufferOf(vCache), bufferOf(tables), bufferOf(seq), bufferOf(pos), bufferOf(w),
    bufferOf(bias ?? w), bufferOf(residual), bufferOf(out)], [
    Hq, Hkv, D, Dv, bs, tables.shape[1], fbits(p.scale), fbits(p.softcap), p.window,
    tables.offset, seq.offset, pos.offset, q.offset, kCache.offset, vCache.offset,
    N, w.offset, bias?.offset ?? 0, residual.offset, out.offset, K,
  ], [T, 1, 1]);
}

/** The same as two kernels: pagedAttention into scratch, then linearAdd. */
function unfused(q: TensorView, kCache: TensorView, vCache: TensorView, tables: TensorView, seq: TensorView, pos: TensorView,
  p: PagedAttentionParams, w: TensorView, bias: TensorView | null, residual: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const [T, Hq] = q.shape, Dv = vCache.shape[3];
  const att: TensorView = { storage: dev.allocate(T * Hq * Dv * 4), dtype: "float32", shape: [T, Hq, Dv], strides: [Hq * Dv, Dv, 1], offset: 0 };
  pagedAttentionKernels.pagedAttention(q, kCache, vCache, tables, seq, pos, att, p);
  matmulKernels.linearAdd({ ...att, shape: [T, Hq * Dv], strides: [Hq * Dv, 1] }, w, bias, residual, out);
  dev.release(att.storage);
}

export const pagedAttentionOutKernels: Pick<KernelSignatures, "pagedAttentionLinearAdd"> = { pagedAttentionLinearAdd };
