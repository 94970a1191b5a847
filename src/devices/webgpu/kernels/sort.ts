/**
 * Row-wise sort and top-k of float32 [rows, n]: a bitonic network over (value, index) pairs padded
 * to a power of two, in global memory (one dispatch per network stage). Ordering: NaN is larger than
 * every number (as in PyTorch); equal values keep index order, so the sort is stable and top-k
 * breaks ties by lower index. Values are float32, indices int64.
 */
import type { KernelSignatures } from "../../kernels.js";
import { numel, type TensorView } from "../../view.js";
import type { WebGPUDevice } from "../device.js";
import { grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { entry, LIBRARY } from "./wgsl.js";

const WG = 256;

/** WGSL: does pair a come before pair b? Indices >= n are padding and go last. */
function orderFn(descending: boolean): string {
  return /* wgsl */ `
fn lessf(a: f32, b: f32) -> bool { return !is_nan(a) && (is_nan(b) || a < b); }
fn before(ka: f32, ia: u32, kb: f32, ib: u32, n: u32) -> bool {
  if (ia >= n || ib >= n) { return ib >= n && (ia < n || ia < ib); }
  let first = ${descending ? "lessf(kb, ka)" : "lessf(ka, kb)"};
  let second = ${descending ? "lessf(ka, kb)" : "lessf(kb, ka)"};
  return first || (!second && ia < ib);
}
`;
}

/** Sort every row of x into scratch keys/indices [rows, P] (P = next power of two >= n). */
function bitonic(dev: WebGPUDevice, x: TensorView, descending: boolean): { keys: GPUBuffer; idx: GPUBuffer; P: number; release: () => void } {
  const n = x.shape[x.shape.length - 1], rows = numel(x) / n;
  const P = 2 ** Math.ceil(Math.log2(Math.max(n, 2)));
  const keys = dev.allocate(rows * P * 4), idx = dev.allocate(rows * P * 4);
  const kb = keys.handle as GPUBuffer, ib = idx.handle as GPUBuffer;
  const init = dev.dispatcher.program("sort:init", ["read", "write", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> KEY: array<f32>;
@group(0) @binding(3) var<storage, read_write> IDX: array<u32>;
${entry(WG)} {
  let t = group_id(wid, nwg) * ${WG}u + lid;
  let n = pu(1u); let P = pu(2u);
  if (t >= pu(0u) * P) { return; }
  let p = t % P;
  var key = 0.0;
  if (p < n) { key = X[pu(3u) + (t / P) * n + p]; }
  KEY[t] = key;
  IDX[t] = p;
}`);
  dev.dispatcher.dispatch(init, [bufferOf(x), kb, ib], [rows, n, P, x.offset], grid(rows * P, WG));
  const step = dev.dispatcher.program(`sort:step:${descending}`, ["write", "write"], () => `${LIBRARY}${orderFn(descending)}
@group(0) @binding(1) var<storage, read_write> KEY: array<f32>;
@group(0) @binding(2) var<storage, read_write> IDX: array<u32>;
${entry(WG)} {
  let t = group_id(wid, nwg) * ${WG}u + lid;
  let n = pu(1u); let P = pu(2u); let k = pu(3u); let j = pu(4u);
  let halfP = P / 2u;
  if (t >= pu(0u) * halfP) { return; }
  let row = t / halfP; let r = t % halfP;
  let a = ((r & ~(j - 1u)) << 1u) | (r & (j - 1u));
  let b = a | j;
  let ia = row * P + a; let ib = row * P + b;
  let ka = KEY[ia]; let xa = IDX[ia]; let kb = KEY[ib]; let xb = IDX[ib];
  let up = (a & k) == 0u;
  if (select(before(ka, xa, kb, xb, n), before(kb, xb, ka, xa, n), up)) {
    KEY[ia] = kb; IDX[ia] = xb; KEY[ib] = ka; IDX[ib] = xa;
  }
}`);
  for (let k = 2; k <= P; k *= 2) {
    for (let j = k / 2; j >= 1; j /= 2) dev.dispatcher.dispatch(step, [kb, ib], [rows, n, P, k, j], grid((rows * P) / 2, WG));
  }
  return { keys: kb, idx: ib, P, release: () => { dev.release(keys); dev.release(idx); } };
}

/** Write the first `k` sorted entries of every row to values (float32) and indices (int64). */
function emit(dev: WebGPUDevice, s: { keys: GPUBuffer; idx: GPUBuffer; P: number }, rows: number, k: number, values: TensorView, indices: TensorView): void {
  const prog = dev.dispatcher.program("sort:emit", ["read", "read", "write", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> KEY: array<f32>;
@group(0) @binding(2) var<storage, read> IDX: array<u32>;
@group(0) @binding(3) var<storage, read_write> VAL: array<f32>;
@group(0) @binding(4) var<storage, read_write> IND: array<u32>;
${entry(WG)} {
  let t = group_id(wid, nwg) * ${WG}u + lid;
  let k = pu(1u);
  if (t >= pu(0u) * k) { return; }
  let src = (t / k) * pu(2u) + t % k;
  VAL[pu(3u) + t] = KEY[src];
  let o = pu(4u) + t;
  IND[2u * o] = IDX[src];
  IND[2u * o + 1u] = 0u;
}`);
  dev.dispatcher.dispatch(prog, [s.keys, s.idx, bufferOf(values), bufferOf(indices)], [rows, k, s.P, values.offset, indices.offset], grid(rows * k, WG));
}

function sort(x: TensorView, values: TensorView, indices: TensorView, descending: boolean): void {
  const dev = deviceOf(x);
  const n = x.shape[x.shape.length - 1], rows = numel(x) / n;
  const s = bitonic(dev, x, descending);
  emit(dev, s, rows, n, values, indices);
  s.release();
}

function topk(x: TensorView, k: number, values: TensorView, indices: TensorView): void {
  const dev = deviceOf(x);
  const n = x.shape[x.shape.length - 1], rows = numel(x) / n;
  const s = bitonic(dev, x, true);
  emit(dev, s, rows, k, values, indices);
  s.release();
}

export const sortKernels: Pick<KernelSignatures, "sort" | "topk"> = { sort, topk };
