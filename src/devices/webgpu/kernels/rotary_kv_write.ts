/**
 * rotaryKVWrite (devices/kernels.ts): a query's rotary, a key's rotary and the paged write of
 * that key and a value as one dispatch. One thread per element of q, then k, then v: norm.ts's
 * rotary formula (rotate_half) for q and k, and paged_attention.ts's slot addressing for the
 * stores into the pools. Devices allowing fewer than 9 storage bindings run the three kernels.
 * With `rows` (compile's rotary-gather fusion), cos/sin are per-position tables [P, R] and token
 * t's row is rows[t] (the gathers of embedding(positions, table) done in place): an id outside
 * [0, P) reads zeros and is reported through the device status block as gather.ts's embedding
 * does; devices allowing fewer storage bindings than that needs gather the rows first.
 */
import type { KernelSignatures } from "../../kernels.js";
import { numel, type TensorView } from "../../view.js";
import { grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { STATUS_EMBEDDING } from "../device.js";
import { gatherKernels } from "./gather.js";
import { normKernels } from "./norm.js";
import { pagedAttentionKernels } from "./paged_attention.js";
import { entry, LIBRARY } from "./wgsl.js";

/** WGSL: element i of a rotary over heads of size D (rotary dims R) of H heads, x at xo and cos/sin at co/so (row k of them: cs_row). */
const ROTATE = /* wgsl */ `
fn rotate(i: u32, H: u32, xo: u32) -> f32 {
  let D = pu(3u); let R = pu(4u); let half = R / 2u;
  let d = i % D;
  let x = xo + i;
  if (d >= R) { return X(x); }
  let row = cs_row(i / (D * H));
  if (row == 0xffffffffu) { return 0.0; }
  let k = row * R + d;
  let cs = C[pu(11u) + k];
  let sn = S[pu(12u) + k];
  if (d < half) { return X(x) * cs - X(x + half) * sn; }
  return X(x) * cs + X(x - half) * sn;
}`;

/** WGSL: cs_row(t), the cos/sin row of token t: t itself, or rows[t] (u32 max when out of range, recorded in the status block). */
function rowLookup(rows: TensorView | null, first: number): string {
  if (!rows) return "fn cs_row(t: u32) -> u32 { return t; }";
  const wide = rows.dtype === "int64";
  return `@group(0) @binding(${first}) var<storage, read> I: array<u32>;
@group(0) @binding(${first + 1}) var<storage, read_write> status: array<atomic<u32>>;
fn cs_row(t: u32) -> u32 {
  let at = pu(18u) + t;
  let lo = I[${wide ? "2u * at" : "at"}];
  let hi = ${wide ? "I[2u * at + 1u]" : "select(0u, 0xffffffffu, (lo >> 31u) == 1u)"};
  let P = pu(19u);
  if (hi != 0u || lo >= P) {
    if (atomicExchange(&status[0], ${STATUS_EMBEDDING}u) == 0u) {
      atomicStore(&status[1], lo);
      atomicStore(&status[2], hi);
      atomicStore(&status[3], P);
    }
    return 0xffffffffu;
  }
  return lo;
}`;
}

function rotaryKVWrite(q: TensorView | null, qOut: TensorView | null, k: TensorView, v: TensorView, cos: TensorView, sin: TensorView,
  kCache: TensorView, vCache: TensorView, slots: TensorView, rows: TensorView | null = null): void {
  const dev = deviceOf(kCache);
  const withQ = q !== null && qOut !== null;
  const bindings = 8 + (withQ ? 1 : 0) + (rows ? 2 : 0);
  if (rows && (dev.gpu.limits.maxStorageBuffersPerShaderStage < bindings || kCache.dtype !== "float32")) return gathered(q, qOut, k, v, cos, sin, kCache, vCache, slots, rows);
  if (dev.gpu.limits.maxStorageBuffersPerShaderStage < bindings || kCache.dtype !== "float32") return unfused(q, qOut, k, v, cos, sin, kCache, vCache, slots);
  const [, , Hk, D] = k.shape, R = cos.shape.at(-1)!;
  const Hq = q ? q.shape[2] : 1;
  const nq = q && qOut ? numel(q) : 0, nk = numel(k), nv = numel(v);
  const rowK = kCache.shape[2] * kCache.shape[3], rowV = vCache.shape[2] * vCache.shape[3];
  // Q and K are read through one accessor per binding; X() picks by the range being processed.
  const access = ["read", "read", "read", "read", "read", "read", "write", "write", ...(withQ ? ["write" as const] : []), ...(rows ? ["read", "write"] as const : [])] as const;
  const prog = dev.dispatcher.program(`rotary_kv_write:${withQ ? "q" : "-"}:${rows?.dtype ?? "-"}`, [...access], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> C: array<f32>;
@group(0) @binding(5) var<storage, read> S: array<f32>;
@group(0) @binding(6) var<storage, read> SL: array<i32>;
@group(0) @binding(7) var<storage, read_write> KC: array<f32>;
@group(0) @binding(8) var<storage, read_write> VC: array<f32>;
${withQ ? "@group(0) @binding(9) var<storage, read_write> QO: array<f32>;" : ""}
${rowLookup(rows, withQ ? 10 : 9)}
var<private> fromQ: bool;
fn X(i: u32) -> f32 { if (fromQ) { return Q[i]; } return K[i]; }
${ROTATE}
${entry(256)} {
  let i = group_id(wid, nwg) * 256u + lid;
  let nq = pu(0u); let nk = pu(1u); let nv = pu(2u);
  ${withQ ? `if (i < nq) {
    fromQ = true;
    QO[pu(8u) + i] = rotate(i, pu(5u), pu(7u));
  } else ` : ""}if (i < nq + nk) {
    fromQ = false;
    let j = i - nq;
    let row = pu(16u);
    KC[pu(13u) + u32(SL[pu(15u) + j / row]) * row + j % row] = rotate(j, pu(6u), pu(9u));
  } else if (i < nq + nk + nv) {
    let j = i - nq - nk;
    let row = pu(17u);
    VC[pu(14u) + u32(SL[pu(15u) + j / row]) * row + j % row] = V[pu(10u) + j];
  }
}`);
  const params = [nq, nk, nv, D, R, Hq, Hk, q?.offset ?? 0, qOut?.offset ?? 0, k.offset, v.offset, cos.offset, sin.offset,
    kCache.offset, vCache.offset, slots.offset, rowK, rowV, rows?.offset ?? 0, cos.shape[0]];
  const buffers = [bufferOf(q ?? k), bufferOf(k), bufferOf(v), bufferOf(cos), bufferOf(sin), bufferOf(slots), bufferOf(kCache), bufferOf(vCache),
    ...(withQ ? [bufferOf(qOut)] : []), ...(rows ? [bufferOf(rows), dev.status] : [])];
  dev.dispatcher.dispatch(prog, buffers, params, grid(nq + nk + nv, 256));
}

/** The rows of the cos/sin tables gathered first (embedding), then the kernel on them. */
function gathered(q: TensorView | null, qOut: TensorView | null, k: TensorView, v: TensorView, cosTable: TensorView, sinTable: TensorView,
  kCache: TensorView, vCache: TensorView, slots: TensorView, rows: TensorView): void {
  const dev = deviceOf(kCache);
  const T = numel(rows), R = cosTable.shape[1];
  const gather = (table: TensorView): TensorView => {
    const out: TensorView = { storage: dev.allocate(T * R * 4), dtype: "float32", shape: [k.shape[0], k.shape[1], R], strides: [k.shape[1] * R, R, 1], offset: 0 };
    gatherKernels.embedding(table, rows, out);
    return out;
  };
  const [cos, sin] = [gather(cosTable), gather(sinTable)];
  rotaryKVWrite(q, qOut, k, v, cos, sin, kCache, vCache, slots);
  dev.release(cos.storage);
  dev.release(sin.storage);
}

/** The same as separate kernels: rotary of q and of k (into scratch), then the paged write. */
function unfused(q: TensorView | null, qOut: TensorView | null, k: TensorView, v: TensorView, cos: TensorView, sin: TensorView,
  kCache: TensorView, vCache: TensorView, slots: TensorView): void {
  const dev = deviceOf(kCache);
  if (q && qOut) normKernels.rotary(q, cos, sin, qOut);
  const scratch = dev.allocate(numel(k) * 4);
  const strides = k.shape.map((_, d) => k.shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const kr: TensorView = { storage: scratch, dtype: "float32", shape: k.shape, strides, offset: 0 };
  normKernels.rotary(k, cos, sin, kr);
  const [T, H, Dk] = [k.shape[0] * k.shape[1], k.shape[2], k.shape[3]];
  pagedAttentionKernels.pagedKVWrite({ ...kr, shape: [T, H, Dk], strides: [H * Dk, Dk, 1] }, v, kCache, vCache, slots);
  dev.release(scratch);
}

export const rotaryKVWriteKernels: Pick<KernelSignatures, "rotaryKVWrite"> = { rotaryKVWrite };
