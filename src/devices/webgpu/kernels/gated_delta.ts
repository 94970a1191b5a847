/**
 * Gated DeltaNet kernels on webgpu. causalConv1d: one thread per output element (and per state
 * element), summing its K taps. The gated delta rule scan: one thread per (batch, head, value column
 * j). Column j of the state evolves independently of the other columns (the update
 * S[:, j] += k * beta (v_j - k . S[:, j]) reads only column j), so threads never synchronise; each
 * walks the tokens in order and keeps its column in stateOut. Same arithmetic order as the cpu
 * kernel and transformers' torch_recurrent_gated_delta_rule.
 */
import type { KernelSignatures } from "../../kernels.js";
import type { TensorView } from "../../view.js";
import { grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { entry, LIBRARY } from "./wgsl.js";

const WG = 64;

function gatedDeltaRule(q: TensorView, k: TensorView, v: TensorView, g: TensorView, beta: TensorView, state: TensorView | null, out: TensorView, stateOut: TensorView): void {
  const dev = deviceOf(out);
  const [B, L, H, Dk] = q.shape, Dv = v.shape[3];
  const threads = B * H * Dv;
  const prog = dev.dispatcher.program("gated_delta_rule", ["read", "read", "read", "read", "read", "read", "write", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> G: array<f32>;
@group(0) @binding(5) var<storage, read> Beta: array<f32>;
@group(0) @binding(6) var<storage, read> S0: array<f32>;
@group(0) @binding(7) var<storage, read_write> O: array<f32>;
@group(0) @binding(8) var<storage, read_write> S: array<f32>;
${entry(WG)} {
  let t_id = group_id(wid, nwg) * ${WG}u + lid;
  if (t_id >= pu(0u)) { return; }
  let L = pu(1u); let H = pu(2u); let Dk = pu(3u); let Dv = pu(4u);
  let j = t_id % Dv;
  let bh = t_id / Dv;
  let b = bh / H; let h = bh % H;
  let sb = pu(13u) + bh * Dk * Dv + j;
  for (var i = 0u; i < Dk; i = i + 1u) {
    var s0 = 0.0;
    if (pu(5u) != 0u) { s0 = S0[pu(11u) + bh * Dk * Dv + i * Dv + j]; }
    S[sb + i * Dv] = s0;
  }
  for (var t = 0u; t < L; t = t + 1u) {
    let row = (b * L + t) * H + h;
    let qk = row * Dk;
    let decay = exp(G[pu(9u) + row]);
    let bt = Beta[pu(10u) + row];
    var kv = 0.0;
    for (var i = 0u; i < Dk; i = i + 1u) {
      let s = S[sb + i * Dv] * decay;
      S[sb + i * Dv] = s;
      kv = kv + s * K[pu(7u) + qk + i];
    }
    let delta = (V[pu(8u) + row * Dv + j] - kv) * bt;
    var o = 0.0;
    for (var i = 0u; i < Dk; i = i + 1u) {
      let s = S[sb + i * Dv] + K[pu(7u) + qk + i] * delta;
      S[sb + i * Dv] = s;
      o = o + s * Q[pu(6u) + qk + i];
    }
    O[pu(12u) + row * Dv + j] = o;
  }
}`);
  dev.dispatcher.dispatch(prog,
    [bufferOf(q), bufferOf(k), bufferOf(v), bufferOf(g), bufferOf(beta), bufferOf(state ?? q), bufferOf(out), bufferOf(stateOut)],
    [threads, L, H, Dk, Dv, state ? 1 : 0, q.offset, k.offset, v.offset, g.offset, beta.offset, state?.offset ?? 0, out.offset, stateOut.offset],
    grid(threads, WG));
}

function causalConv1d(x: TensorView, w: TensorView, state: TensorView | null, out: TensorView, stateOut: TensorView): void {
  const dev = deviceOf(out);
  const [B, L, C] = x.shape, K = w.shape[1];
  const threads = B * (L + K - 1) * C; // the outputs, then the new state's elements
  const prog = dev.dispatcher.program("causal_conv1d", ["read", "read", "read", "write", "write"], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> W: array<f32>;
@group(0) @binding(3) var<storage, read> S0: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<storage, read_write> S: array<f32>;
// Row r of [state; x] for batch b at channel c (zero where there is no state).
fn xp(b: u32, r: u32, c: u32) -> f32 {
  let L = pu(2u); let C = pu(3u); let P = pu(4u) - 1u;
  if (r >= P) { return X[pu(6u) + (b * L + r - P) * C + c]; }
  if (pu(5u) == 0u) { return 0.0; }
  return S0[pu(8u) + (b * P + r) * C + c];
}
${entry(WG)} {
  let i = group_id(wid, nwg) * ${WG}u + lid;
  if (i >= pu(0u)) { return; }
  let B = pu(1u); let L = pu(2u); let C = pu(3u); let K = pu(4u);
  let c = i % C;
  let n_out = B * L * C;
  if (i < n_out) {
    let bt = i / C;
    let b = bt / L; let t = bt % L;
    var acc = 0.0;
    for (var k = 0u; k < K; k = k + 1u) { acc = acc + W[pu(7u) + c * K + k] * xp(b, t + k, c); }
    O[pu(9u) + i] = acc;
  } else {
    let j = i - n_out;
    let br = j / C;
    let b = br / (K - 1u); let r = br % (K - 1u);
    S[pu(10u) + j] = xp(b, L + r, c);
  }
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(w), bufferOf(state ?? x), bufferOf(out), bufferOf(stateOut)],
    [threads, B, L, C, K, state ? 1 : 0, x.offset, w.offset, state?.offset ?? 0, out.offset, stateOut.offset], grid(threads, WG));
}

export const gatedDeltaKernels: Pick<KernelSignatures, "causalConv1d" | "gatedDeltaRule"> = { causalConv1d, gatedDeltaRule };
