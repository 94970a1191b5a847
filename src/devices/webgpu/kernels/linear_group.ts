/**
 * linearGroup (devices/kernels.ts): up to three linears that share one input, optionally
 * RMS-normalized first, as one matrix-vector dispatch for few rows. One thread per output column
 * over all weights (column t of weight i when t falls in i's range), holding the M <= GEMV_ROWS
 * dot products as matmul.ts's gemv does; with a norm, every thread first takes the M rows' mean
 * squares itself (K words each) and applies `x * r * (offset + weight)` to x as it reads it,
 * the element formula of norm.ts's rmsNorm. With an epilogue (weights of one shape), thread n
 * computes column n of every product and writes the chain's value of them (SiLU(gate) * up).
 * Other shapes and alignments run rmsNorm into scratch, one linear per weight, and the chain.
 */
import type { FusedStep, KernelSignatures, LinearGroupNorm } from "../../kernels.js";
import { isContiguous, type TensorView } from "../../view.js";
import { fbits } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { elementwiseKernels, fusedExpr, fusedKey } from "./elementwise.js";
import { matmulKernels } from "./matmul.js";
import { normKernels } from "./norm.js";
import { binding, LIBRARY, loader } from "./wgsl.js";

/**
 * WGSL of the RMSNorm prologue, shared with linear_argmax.ts and mlp_linear_add.ts: `G4(k)`, the
 * norm weight (binding `g`) at k..k+3 plus its added offset (parameters 3: the weight's offset, 5:
 * the added offset), and the loop setting `r[m]` = 1 / rms of input row m (needs M, K, K4 and xb in
 * scope; eps is parameter 4).
 */
export const NORM_WEIGHT_SOURCE = `fn G4(k: u32) -> vec4<f32> {
  let b = pu(3u) + 4u * k;
  return vec4<f32>(ld_g(b), ld_g(b + 1u), ld_g(b + 2u), ld_g(b + 3u)) + vec4<f32>(pf(5u));
}`;
export const ROW_NORMS_SOURCE = `for (var m = 0u; m < M; m = m + 1u) {
    var ss = 0.0;
    for (var k = 0u; k < K4; k = k + 1u) { let v = X4[xb + m * K4 + k]; ss = ss + dot(v, v); }
    r[m] = 1.0 / sqrt(ss / f32(K) + pf(4u));
  }`;

/** Rows up to which the fused kernel runs (as gemv's GEMV_ROWS). */
const ROWS = 8;
/** Parameter words before the per-weight block (start column, columns, weight offset, out offset). */
const HEAD = 6;

function linearGroup(x: TensorView, norm: LinearGroupNorm | null, ws: TensorView[], outs: TensorView[], epilogue: readonly FusedStep[] | null = null): void {
  const [M, K] = x.shape;
  const total = epilogue ? ws[0].shape[0] : ws.reduce((a, w) => a + w.shape[0], 0);
  const fast = M <= ROWS && K % 4 === 0 && x.offset % 4 === 0 && isContiguous(x) && ws.length <= 3 && Math.ceil(total / 64) <= 65535
    && ws.every((w) => w.dtype === "float32" && w.offset % 4 === 0 && isContiguous(w));
  if (!fast) return unfused(x, norm, ws, outs, epilogue);
  const dev = deviceOf(outs[0]);
  const G = ws.length;
  const xv = norm ? "X4[xb + m * K4 + k] * r[m] * gv" : "X4[xb + m * K4 + k]";
  const blocks = ws.map((_, i) => `
  if (t < pu(${HEAD + 4 * i}u) + pu(${HEAD + 4 * i + 1}u)) {
    let N = pu(${HEAD + 4 * i + 1}u);
    let n = t - pu(${HEAD + 4 * i}u);
    let wb = pu(${HEAD + 4 * i + 2}u) / 4u + n * K4;
    for (var k = 0u; k < K4; k = k + 1u) {
      let wv = W${i}[wb + k];
      ${norm ? "let gv = G4(k);" : ""}
      for (var m = 0u; m < M; m = m + 1u) { acc[m] = acc[m] + dot(${xv}, wv); }
    }
    for (var m = 0u; m < M; m = m + 1u) { Y${i}[pu(${HEAD + 4 * i + 3}u) + m * N + n] = acc[m]; }
    return;
  }`).join("");
  const zip = epilogue ? `
  if (t >= pu(${HEAD + 1}u)) { return; }
  let N = pu(${HEAD + 1}u);
  let n = t;
  ${ws.map((_, i) => `var acc${i}: array<f32, ${ROWS}>;
  let wb${i} = pu(${HEAD + 4 * i + 2}u) / 4u + n * K4;`).join("\n  ")}
  for (var k = 0u; k < K4; k = k + 1u) {
    ${norm ? "let gv = G4(k);" : ""}
    ${ws.map((_, i) => `let wv${i} = W${i}[wb${i} + k];`).join("\n    ")}
    for (var m = 0u; m < M; m = m + 1u) {
      let xv = ${xv};
      ${ws.map((_, i) => `acc${i}[m] = acc${i}[m] + dot(xv, wv${i});`).join("\n      ")}
    }
  }
  for (var m = 0u; m < M; m = m + 1u) { Y0[pu(${HEAD + 3}u) + m * N + n] = ${fusedExpr(epilogue, ws.map((_, i) => `acc${i}[m]`))}; }` : "";
  const key = `linear_group:${G}:${norm ? `norm:${norm.weight.dtype}` : "-"}:${epilogue ? fusedKey(epilogue) : "-"}`;
  const access = ["read", "read", ...ws.map(() => "read" as const), ...outs.map(() => "write" as const)] as const;
  const prog = dev.dispatcher.program(key, [...access], () => `${LIBRARY}
@group(0) @binding(1) var<storage, read> X4: array<vec4<f32>>;
${binding(2, "g", "read")}${loader("g", norm?.weight.dtype ?? "float32")}
${ws.map((_, i) => `@group(0) @binding(${3 + i}) var<storage, read> W${i}: array<vec4<f32>>;`).join("\n")}
${outs.map((_, i) => `@group(0) @binding(${3 + G + i}) var<storage, read_write> Y${i}: array<f32>;`).join("\n")}
${NORM_WEIGHT_SOURCE}
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let M = pu(0u); let K = pu(1u); let K4 = K / 4u;
  let t = gid.x;
  let xb = pu(2u) / 4u;
  var r: array<f32, ${ROWS}>;
  ${norm ? ROW_NORMS_SOURCE : ""}
  ${epilogue ? zip : `var acc: array<f32, ${ROWS}>;${blocks}`}
}`);
  const params = [M, K, x.offset, norm?.weight.offset ?? 0, fbits(norm?.eps ?? 0), fbits(norm?.offset ?? 0)];
  let start = 0;
  ws.forEach((w, i) => {
    params.push(start, w.shape[0], w.offset, (outs[i] ?? outs[0]).offset);
    start += w.shape[0];
  });
  const buffers = [bufferOf(x), bufferOf(norm?.weight ?? x), ...ws.map(bufferOf), ...outs.map(bufferOf)];
  dev.dispatcher.dispatch(prog, buffers, params, [Math.ceil(total / 64), 1, 1]);
}

/** The same as separate kernels: rmsNorm into scratch, one linear per weight (into scratch with an epilogue), then the epilogue's chain. */
function unfused(x: TensorView, norm: LinearGroupNorm | null, ws: TensorView[], outs: TensorView[], epilogue: readonly FusedStep[] | null): void {
  const dev = deviceOf(outs[0]);
  const [M, K] = x.shape;
  const scratch: ReturnType<typeof dev.allocate>[] = [];
  const temp = (shape: number[]): TensorView => {
    scratch.push(dev.allocate(shape[0] * shape[1] * 4));
    return { storage: scratch.at(-1)!, dtype: "float32", shape, strides: [shape[1], 1], offset: 0 };
  };
  const input = norm ? temp([M, K]) : x;
  if (norm) normKernels.rmsNorm(x, norm.weight, input, norm.eps, norm.offset);
  const products = epilogue ? ws.map((w) => temp([M, w.shape[0]])) : outs;
  ws.forEach((w, i) => matmulKernels.linear(input, w, null, products[i]));
  if (epilogue) elementwiseKernels.fusedElementwise(epilogue, products, { ...products[0], storage: outs[0].storage, offset: outs[0].offset });
  for (const s of scratch) dev.release(s);
}

export const linearGroupKernels: Pick<KernelSignatures, "linearGroup"> = { linearGroup };
