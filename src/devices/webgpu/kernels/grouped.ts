/**
 * gatherLinear in one grouped pass when the expert weights are slices of one buffer at a uniform
 * stride (nn's SparseMoeBlock stacks them so): a sort dispatch groups the M rows by expert
 * (counting sort in one workgroup; each group cut into tiles of up to 16 rows, TILES[0] = count,
 * then (expert, first sorted position, rows)), then one GEMM dispatch computes every tile — row
 * tiles of all experts together, each against its own expert's weight. Two dispatches per call,
 * whatever the number of experts. An expert index outside [0, E) is reported through the device
 * status block (as by the per-expert path) and its row is zeroed. The GEMM gives each invocation
 * one output column and streams that weight row once per tile, reading the tile's input rows as
 * uniform loads: on GPUs and on CPU rasterizers (lavapipe) alike this beats staging tiles in
 * workgroup memory when tiles have few rows, as in decoding.
 */
import { numel, type TensorView } from "../../view.js";
import { STATUS_GATHER_LINEAR } from "../device.js";
import { bufferOf, deviceOf } from "./common.js";
import { w8Source } from "./skinny.js";
import { binding, LIBRARY, loader } from "./wgsl.js";

const TM = 16;

/** The uniform element stride between consecutive experts' weights in one buffer, or null. */
export function expertStride(w: TensorView[]): number | null {
  if (w.length < 2) return null;
  const stride = w[1].offset - w[0].offset;
  if (stride < numel(w[0])) return null;
  return w.every((we, e) => we.storage === w[0].storage && we.offset === w[0].offset + e * stride) ? stride : null;
}

const SORT = /* wgsl */ `
@group(0) @binding(1) var<storage, read> IDX: array<u32>;
@group(0) @binding(2) var<storage, read_write> TILES: array<u32>;
@group(0) @binding(3) var<storage, read_write> SORTED: array<u32>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
var<workgroup> cnt: array<atomic<u32>, 1025>;
fn expert_of(m: u32) -> u32 {
  let at = 2u * (pu(2u) + m);
  let lo = IDX[at]; let hi = IDX[at + 1u];
  if (hi != 0u || lo >= pu(1u)) {
    if (atomicExchange(&status[0], ${STATUS_GATHER_LINEAR}u) == 0u) {
      atomicStore(&status[1], lo); atomicStore(&status[2], hi); atomicStore(&status[3], pu(1u));
    }
    return pu(1u);
  }
  return lo;
}
@compute @workgroup_size(256) fn main(@builtin(local_invocation_index) lid: u32) {
  let M = pu(0u); let E = pu(1u) + 1u; // group E collects rows with a bad index (zeroed)
  for (var e = lid; e < E; e = e + 256u) { atomicStore(&cnt[e], 0u); }
  workgroupBarrier();
  for (var m = lid; m < M; m = m + 256u) { atomicAdd(&cnt[expert_of(m)], 1u); }
  workgroupBarrier();
  if (lid == 0u) {
    var at = 0u; var nt = 0u;
    for (var e = 0u; e < E; e = e + 1u) {
      let c = atomicLoad(&cnt[e]);
      for (var s = 0u; s < c; s = s + ${TM}u) {
        TILES[1u + 3u * nt] = e; TILES[2u + 3u * nt] = at + s; TILES[3u + 3u * nt] = min(${TM}u, c - s);
        nt = nt + 1u;
      }
      atomicStore(&cnt[e], at);
      at = at + c;
    }
    TILES[0] = nt;
  }
  workgroupBarrier();
  for (var m = lid; m < M; m = m + 256u) { SORTED[atomicAdd(&cnt[expert_of(m)], 1u)] = m; }
}`;

/**
 * The grouped GEMM: workgroup (x, y) takes row tile y (up to 16 rows of one expert); each
 * invocation owns one output column n and streams its weight row once for all the tile's rows,
 * which every invocation reads alike (uniform loads). `v8`: K % 8 == 0 and 8-aligned weight
 * offsets, so weights load 8 at a time (one vec4<u32> of float16/bfloat16, two of float32).
 */
function gemmSource(wd: TensorView["dtype"], v8: boolean): string {
  const loop = v8 ? `for (var k = 0u; k < K; k = k + 8u) {
    let w = w8(wb + k);
    for (var r = 0u; r < rows; r = r + 1u) {
      let xb = xrow[r] + k;
      acc[r] = acc[r] + dot(vec4<f32>(X[xb], X[xb + 1u], X[xb + 2u], X[xb + 3u]), w[0]) + dot(vec4<f32>(X[xb + 4u], X[xb + 5u], X[xb + 6u], X[xb + 7u]), w[1]);
    }
  }` : `for (var k = 0u; k < K; k = k + 1u) {
    let w = ld_w(wb + k);
    for (var r = 0u; r < rows; r = r + 1u) { acc[r] = fma(X[xrow[r] + k], w, acc[r]); }
  }`;
  return `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
${v8 ? "@group(0) @binding(2) var<storage, read> W4: array<vec4<u32>>;" : `${binding(2, "w", "read")}${loader("w", wd)}`}
@group(0) @binding(3) var<storage, read> TILES: array<u32>;
@group(0) @binding(4) var<storage, read> SORTED: array<u32>;
@group(0) @binding(5) var<storage, read_write> Y: array<f32>;
${v8 ? w8Source(wd) : ""}
@compute @workgroup_size(64) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.y;
  if (t >= TILES[0]) { return; }
  let N = pu(0u); let K = pu(1u); let E = pu(2u);
  let e = TILES[1u + 3u * t]; let row0 = TILES[2u + 3u * t]; let rows = TILES[3u + 3u * t];
  let n = wid.x * 64u + lid;
  if (n >= N) { return; }
  var xrow: array<u32, ${TM}>;
  for (var r = 0u; r < rows; r = r + 1u) { xrow[r] = pu(3u) + SORTED[row0 + r] * K; }
  var acc: array<f32, ${TM}>;
  let wb = pu(4u) + min(e, E - 1u) * pu(5u) + n * K;
  ${loop}
  for (var r = 0u; r < rows; r = r + 1u) {
    Y[pu(6u) + SORTED[row0 + r] * N + n] = select(acc[r], 0.0, e >= E);
  }
}`;
}

/** out[m] = x[m] @ w[idx[m]]^T for weights `w` that are slices of one buffer `stride` elements apart (E <= 1024). */
export function groupedGatherLinear(x: TensorView, w: TensorView[], idx: TensorView, out: TensorView, stride: number): void {
  const dev = deviceOf(out);
  const [M, K] = x.shape, N = w[0].shape[0], E = w.length;
  const maxTiles = Math.ceil(M / TM) + E + 1;
  if (maxTiles > 65535) throw new RangeError(`webgpu: gather_linear over ${M} rows and ${E} experts needs more than 65535 row tiles`);
  const tiles = dev.allocate((1 + 3 * maxTiles) * 4), sorted = dev.allocate(Math.max(1, M) * 4);
  const sort = dev.dispatcher.program("gather_linear_sort", ["read", "write", "write", "write"], () => `${LIBRARY}${SORT}`);
  dev.dispatcher.dispatch(sort, [bufferOf(idx), tiles.handle as GPUBuffer, sorted.handle as GPUBuffer, dev.status], [M, E, idx.offset], [1, 1, 1]);
  const v8 = K % 8 === 0 && w[0].offset % 8 === 0 && stride % 8 === 0;
  const gemm = dev.dispatcher.program(`gather_linear_grouped:${w[0].dtype}:${v8}`, ["read", "read", "read", "read", "write"], () => gemmSource(w[0].dtype, v8));
  dev.dispatcher.dispatch(gemm, [bufferOf(x), bufferOf(w[0]), tiles.handle as GPUBuffer, sorted.handle as GPUBuffer, bufferOf(out)],
    [N, K, E, x.offset, w[0].offset, stride, out.offset], [Math.ceil(N / 64), maxTiles, 1]);
  dev.release(tiles);
  dev.release(sorted);
}
