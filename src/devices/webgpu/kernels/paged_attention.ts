/**
 * Paged attention on webgpu (the cpu addon's pagedKVWrite / pagedAttention contracts, native.ts).
 * pagedKVWrite: one thread per stored float. pagedAttention: one workgroup per (query token, query
 * head); keys are visited in chunks of 64 (one per thread), each key's slot looked up through the
 * sequence's block table (each thread one key's score), with an online softmax (running max and
 * sum): the threads holding output dims (lid < Dv) read the chunk's scores from workgroup memory
 * and take its max, weights and sum themselves while accumulating their dims, so a chunk costs two
 * barriers (software adapters such as lavapipe pay dearly per barrier). The per-head body
 * (attendHead) also serves paged_attention_out.ts. Block ids and positions are not range-checked
 * on the GPU: the caller (serve's paged cache) builds them.
 */
import type { KernelSignatures, PagedAttentionParams } from "../../kernels.js";
import type { TensorView } from "../../view.js";
import { fbits, grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { MAX_HEAD, WG } from "./attention.js";
import { entry, LIBRARY } from "./wgsl.js";

/** The WGSL kernels read and write float32 pools only. */
function float32Pools(op: string, kCache: TensorView): void {
  if (kCache.dtype !== "float32") throw new TypeError(`webgpu: ${op} needs float32 block pools, got ${kCache.dtype}`);
}

function pagedKVWrite(k: TensorView, v: TensorView, kCache: TensorView, vCache: TensorView, slots: TensorView): void {
  float32Pools("paged_kv_write", kCache);
  const dev = deviceOf(kCache);
  const T = slots.shape[0], [, , H, D] = kCache.shape, Dv = vCache.shape[3];
  const prog = dev.dispatcher.program("paged_kv_write", ["read", "read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> SL: array<i32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
${entry(256)} {
  let i = group_id(wid, nwg) * 256u + lid;
  if (i >= pu(0u)) { return; }
  let row = pu(1u);
  let t = i / row;
  C[pu(4u) + u32(SL[pu(3u) + t]) * row + i % row] = X[pu(2u) + i];
}`);
  for (const [x, cache, d] of [[k, kCache, D], [v, vCache, Dv]] as const) {
    const n = T * H * d;
    dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(slots), bufferOf(cache)], [n, H * d, x.offset, slots.offset, cache.offset], grid(n, 256));
  }
}

/**
 * WGSL: `fn attend(t, h, lid)`, paged attention of query token t, head h by the calling workgroup
 * (WG threads, uniform control flow), each output dim d stored through `store(d, value)`. Reads
 * Q, K, V, BT, SEQ, POS and parameters 0-14 as pagedAttention binds them.
 */
export function attendHead(store: (d: string, v: string) => string): string {
  return /* wgsl */ `
var<workgroup> qs: array<f32, ${MAX_HEAD}>;
var<workgroup> ps: array<f32, ${WG}>;
var<workgroup> slot: array<u32, ${WG}>;
fn attend(t: u32, h: u32, lid: u32) {
  let Hq = pu(0u); let Hkv = pu(1u); let D = pu(2u); let Dv = pu(3u); let bs = pu(4u); let mb = pu(5u);
  let hk = h / (Hq / Hkv);
  let scale = pf(6u); let softcap = pf(7u); let window = i32(pu(8u));
  let s_row = u32(SEQ[pu(10u) + t]) * mb + pu(9u);
  let p = POS[pu(11u) + t];
  let qb = pu(12u) + (t * Hq + h) * D;
  workgroupBarrier();
  for (var d = lid; d < D; d = d + ${WG}u) { qs[d] = Q[qb + d]; }
  let hi = p + 1;
  var lo = 0;
  if (window > 0) { lo = max(0, hi - window); }
  var acc: array<f32, ${MAX_HEAD / WG}>;
  for (var u = 0u; u < ${MAX_HEAD / WG}u; u = u + 1u) { acc[u] = 0.0; }
  var m = -inf_f();
  var l = 0.0;
  workgroupBarrier();
  for (var j0 = lo; j0 < hi; j0 = j0 + ${WG}) {
    let j = j0 + i32(lid);
    var s = -inf_f();
    if (j < hi) {
      let sl = u32(BT[s_row + u32(j) / bs]) * bs + u32(j) % bs;
      slot[lid] = sl;
      let kr = pu(13u) + (sl * Hkv + hk) * D;
      var dot = 0.0;
      for (var d = 0u; d < D; d = d + 1u) { dot = fma(qs[d], K[kr + d], dot); }
      s = dot * scale;
      if (softcap > 0.0) { s = softcap * tanh_f(s / softcap); }
    }
    // The threads holding output dims (lid < Dv) take the chunk's softmax themselves from the
    // scores in workgroup memory: two barriers a chunk, and idle threads skip the scans.
    ps[lid] = s;
    workgroupBarrier();
    if (lid < Dv) {
      let cnt = u32(min(${WG}, hi - j0));
      var cm = -inf_f();
      for (var jj = 0u; jj < cnt; jj = jj + 1u) { cm = max(cm, ps[jj]); }
      let mn = max(m, cm);
      let alpha = exp_f(m - mn);
      for (var u = 0u; u < ${MAX_HEAD / WG}u; u = u + 1u) { acc[u] = acc[u] * alpha; }
      var cs = 0.0;
      for (var jj = 0u; jj < cnt; jj = jj + 1u) {
        let sj = ps[jj];
        var pj = 0.0;
        if (sj != -inf_f()) { pj = exp_f(sj - mn); }
        cs = cs + pj;
        let vb = pu(14u) + (slot[jj] * Hkv + hk) * Dv;
        for (var u = 0u; u < ${MAX_HEAD / WG}u; u = u + 1u) {
          let d = lid + u * ${WG}u;
          if (d >= Dv) { break; }
          acc[u] = fma(pj, V[vb + d], acc[u]);
        }
      }
      l = l * alpha + cs;
      m = mn;
    }
    workgroupBarrier();
  }
  for (var u = 0u; u < ${MAX_HEAD / WG}u; u = u + 1u) {
    let d = lid + u * ${WG}u;
    if (d >= Dv) { break; }
    ${store("d", "select(0.0, acc[u] / l, l > 0.0)")}
  }
}`;
}

function pagedAttention(q: TensorView, kCache: TensorView, vCache: TensorView, tables: TensorView, seq: TensorView, pos: TensorView, out: TensorView, p: PagedAttentionParams): void {
  float32Pools("paged_attention", kCache);
  const dev = deviceOf(out);
  const [T, Hq, D] = q.shape, [, bs, Hkv] = kCache.shape, Dv = vCache.shape[3];
  if (D > MAX_HEAD || Dv > MAX_HEAD) throw new RangeError(`webgpu: attention head size ${Math.max(D, Dv)} exceeds ${MAX_HEAD}`);
  if (T > 65535 || Hq > 65535) throw new RangeError(`webgpu: paged attention grid [${T}, ${Hq}] exceeds 65535 per dimension`);
  const prog = dev.dispatcher.program("paged_attention", ["read", "read", "read", "read", "read", "read", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> BT: array<i32>;
@group(0) @binding(5) var<storage, read> SEQ: array<i32>;
@group(0) @binding(6) var<storage, read> POS: array<i32>;
@group(0) @binding(7) var<storage, read_write> O: array<f32>;
${attendHead((d, v) => `O[pu(15u) + (t * pu(0u) + h) * pu(3u) + ${d}] = ${v};`)}
@compute @workgroup_size(${WG}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  attend(wid.x, wid.y, lid);
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(q), bufferOf(kCache), bufferOf(vCache), bufferOf(tables), bufferOf(seq), bufferOf(pos), bufferOf(out)], [
    Hq, Hkv, D, Dv, bs, tables.shape[1], fbits(p.scale), fbits(p.softcap), p.window,
    tables.offset, seq.offset, pos.offset, q.offset, kCache.offset, vCache.offset, out.offset,
  ], [T, Hq, 1]);
}

export const pagedAttentionKernels: Pick<KernelSignatures, "pagedKVWrite" | "pagedAttention"> = { pagedKVWrite, pagedAttention };
