/**
 * Scaled dot-product attention with grouped KV heads, soft-capping, causal and sliding-window
 * masks, an optional additive mask and optional attention sinks (the cpu addon's sdpa contract,
 * native.ts). A sink starts the online softmax as a logit with no value (running max = sink, sum = 1). One workgroup
 * per (query, head, batch): keys are visited in chunks of 64 (one per thread), with an online
 * softmax (running max and sum) so any number of keys fits; each thread accumulates its share of
 * the Dv output dims. Fully masked queries output zeros. Keys and values are read in their dtype
 * (float32, or a float16 / bfloat16 KV cache).
 */
import type { KernelSignatures, SdpaParams } from "../../kernels.js";
import type { TensorView } from "../../view.js";
import { fbits } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { binding, LIBRARY, loader } from "./wgsl.js";

export const WG = 64;
/** WGSL: a workgroup sum or max of one f32 per thread, the same (uniform) value returned to every
 * thread; shared by the attention kernels (workgroups of WG threads). */
export const WG_REDUCE = /* wgsl */ `
var<workgroup> red: array<f32, ${WG}>;
fn wg_reduce(v: f32, lid: u32, is_max: bool) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s) { red[lid] = select(red[lid] + red[lid + s], max(red[lid], red[lid + s]), is_max); }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&red[0]);
  workgroupBarrier();
  return r;
}`;
/** Largest head size (D and Dv) the kernel holds in workgroup memory / registers. */
export const MAX_HEAD = 512;

function sdpa(q: TensorView, k: TensorView, v: TensorView, mask: TensorView | null, out: TensorView, p: SdpaParams): void {
  const dev = deviceOf(out);
  const [B, Hq, Lq, D] = q.shape, [, Hkv, Lk] = k.shape, Dv = v.shape[3];
  if (D > MAX_HEAD || Dv > MAX_HEAD) throw new RangeError(`webgpu: attention head size ${Math.max(D, Dv)} exceeds ${MAX_HEAD}`);
  if (Lq > 65535 || Hq > 65535 || B > 65535) throw new RangeError(`webgpu: attention grid [${Lq}, ${Hq}, ${B}] exceeds 65535 per dimension`);
  const sinks = p.sinks;
  const prog = dev.dispatcher.program(`sdpa:${mask ? "mask" : "-"}:${sinks ? "sinks" : "-"}:${k.dtype}`, ["read", "read", "read", "read", "write", "read"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> Q: array<f32>;
${binding(2, "k", "read")}${loader("k", k.dtype)}${binding(3, "v", "read")}${loader("v", v.dtype)}
@group(0) @binding(4) var<storage, read> MASK: array<f32>;
@group(0) @binding(5) var<storage, read_write> O: array<f32>;
@group(0) @binding(6) var<storage, read> SINKS: array<f32>;
var<workgroup> qs: array<f32, ${MAX_HEAD}>;
var<workgroup> ps: array<f32, ${WG}>;
${WG_REDUCE}
@compute @workgroup_size(${WG}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x; let h = wid.y; let b = wid.z;
  let Hq = pu(0u); let Hkv = pu(1u); let Lq = pu(2u); let Lk = pu(3u); let D = pu(4u); let Dv = pu(5u);
  let hk = h / (Hq / Hkv);
  let qb = pu(6u) + b * pu(7u) + h * pu(8u) + i * pu(9u);
  let kb = pu(11u) + b * pu(12u) + hk * pu(13u);
  let vb = pu(16u) + b * pu(17u) + hk * pu(18u);
  let mb = pu(21u) + b * pu(22u) + h * pu(23u) + i * pu(24u);
  let scale = pf(25u); let softcap = pf(26u); let causal = pi(27u); let window = i32(pu(28u));
  for (var d = lid; d < D; d = d + ${WG}u) { qs[d] = Q[qb + d * pu(10u)]; }
  // Keys [lo, hi) can be unmasked by the causal and window rules.
  var hi = i32(Lk);
  if (causal >= 0) { hi = min(hi, i32(i) + causal + 1); }
  var lo = 0;
  if (window > 0) { lo = max(0, i32(i) + causal - window + 1); }
  var acc: array<f32, ${MAX_HEAD / WG}>;
  var m = -inf_f();
  var l = 0.0;
  ${sinks ? "m = SINKS[pu(30u) + h]; l = 1.0;" : ""}
  workgroupBarrier();
  for (var j0 = lo; j0 < hi; j0 = j0 + ${WG}) {
    let j = j0 + i32(lid);
    var s = -inf_f();
    if (j < hi) {
      let kr = kb + u32(j) * pu(14u);
      var dot = 0.0;
      for (var d = 0u; d < D; d = d + 1u) { dot = fma(qs[d], ld_k(kr + d * pu(15u)), dot); }
      s = dot * scale;
      if (softcap > 0.0) { s = softcap * tanh_f(s / softcap); }
      ${mask ? "s = s + MASK[mb + u32(j)];" : ""}
    }
    let cm = wg_reduce(s, lid, true);
    let mn = max(m, cm);
    if (is_neg_inf(mn)) { continue; }
    let alpha = exp_f(m - mn);
    var pj = 0.0;
    if (s != -inf_f()) { pj = exp_f(s - mn); }
    ps[lid] = pj;
    l = l * alpha + wg_reduce(pj, lid, false);
    m = mn;
    let cnt = u32(min(${WG}, hi - j0));
    for (var t = 0u; t < ${MAX_HEAD / WG}u; t = t + 1u) {
      let d = lid + t * ${WG}u;
      if (d >= Dv) { break; }
      var a = acc[t] * alpha;
      for (var jj = 0u; jj < cnt; jj = jj + 1u) { a = fma(ps[jj], ld_v(vb + (u32(j0) + jj) * pu(19u) + d * pu(20u)), a); }
      acc[t] = a;
    }
    workgroupBarrier();
  }
  let ob = pu(29u) + ((b * Lq + i) * Hq + h) * Dv;
  for (var t = 0u; t < ${MAX_HEAD / WG}u; t = t + 1u) {
    let d = lid + t * ${WG}u;
    if (d >= Dv) { break; }
    O[ob + d] = select(0.0, acc[t] / l, l > 0.0);
  }
}`);
  const ms = mask ? mask.strides : [0, 0, 0, 0];
  dev.dispatcher.dispatch(prog, [bufferOf(q), bufferOf(k), bufferOf(v), bufferOf(mask ?? q), bufferOf(out), bufferOf(sinks ?? q)], [
    Hq, Hkv, Lq, Lk, D, Dv,
    q.offset, ...q.strides, k.offset, ...k.strides, v.offset, ...v.strides,
    mask?.offset ?? 0, ms[0], ms[1], ms[2],
    fbits(p.scale), fbits(p.softcap), p.causalOffset, p.window, out.offset, sinks?.offset ?? 0,
  ], [Lq, Hq, B]);
}

export const attentionKernels: Pick<KernelSignatures, "sdpa"> = { sdpa };
