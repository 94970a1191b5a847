/**
 * Linear for a few dozen rows (batched decoding: 9 to SKINNY_ROWS rows): out[m, n] = x[m] @ w[n]^T
 * (+ bias[n]) (+ residual[m, n]). A workgroup of 64 invocations takes 4 rows and 256 columns; each
 * invocation owns 4 columns 64 apart and keeps the 4 x 4 sums in named f32 registers (the WGSL is
 * unrolled as generated, so no private array is indexed at run time). Per step of 8 along k it
 * loads 8 weights of each of its columns (one vec4<u32> of float16/bfloat16, two of float32) and
 * the 4 rows' 8 inputs, which every invocation reads alike (uniform loads).
 *
 * Why this shape: on Mesa's lavapipe (invocations run as SIMD lanes of a CPU thread) the shared-
 * memory tiled GEMM of ./matmul.ts spends its time in barriers and per-lane workgroup-memory
 * gathers; here each uniform input load feeds 8 lane-wide FMAs and each weight load 2, which
 * measured about 2.7x the tiled kernel's throughput at 64 x 32000 x 512 (bfloat16 weights).
 * Needs K % 8 == 0, x offset % 4 == 0 and weight offset % 8 == 0 (float32: % 4); see `fitsSkinny`.
 */
import type { DType } from "../../dtype.js";
import type { TensorView } from "../../view.js";
import { bufferOf, deviceOf } from "./common.js";
import { binding, LIBRARY, loader } from "./wgsl.js";

/** Rows up to which linear uses this kernel (above, the tiled GEMM reuses weights across more rows). */
export const SKINNY_ROWS = 64;
/** Rows per workgroup, columns per invocation, invocations per workgroup. */
const TM = 4, C = 4, WG = 64;

/** WGSL `fn w8(e: u32) -> mat2x4<f32>`: the 8 weights at element e (e % 8 == 0; float32 e % 4) of `W4: array<vec4<u32>>`. */
export function w8Source(wd: DType): string {
  const body = wd === "float32"
    ? "return mat2x4<f32>(bitcast<vec4<f32>>(W4[e / 4u]), bitcast<vec4<f32>>(W4[e / 4u + 1u]));"
    : wd === "bfloat16"
      ? `let v = W4[e / 8u];
  return mat2x4<f32>(bitcast<vec4<f32>>(vec4<u32>(v.x << 16u, v.x & 0xffff0000u, v.y << 16u, v.y & 0xffff0000u)),
                     bitcast<vec4<f32>>(vec4<u32>(v.z << 16u, v.z & 0xffff0000u, v.w << 16u, v.w & 0xffff0000u)));`
      : `let v = W4[e / 8u];
  return mat2x4<f32>(vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)), vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)));`;
  return `fn w8(e: u32) -> mat2x4<f32> {\n  ${body}\n}\n`;
}

/** Whether `skinnyLinear` takes this product: M rows in (gemv, SKINNY_ROWS], floating weights, aligned operands. */
export function fitsSkinny(x: TensorView, w: TensorView, M: number, N: number, K: number): boolean {
  const wAlign = w.dtype === "float32" ? 4 : 8;
  return M <= SKINNY_ROWS && K > 0 && K % 8 === 0 && x.offset % 4 === 0 && w.offset % wAlign === 0 &&
    (w.dtype === "float32" || w.dtype === "float16" || w.dtype === "bfloat16") &&
    x.strides[0] === K && x.strides[1] === 1 && w.strides[0] === K && w.strides[1] === 1 && Math.ceil(N / (C * WG)) <= 65535;
}

function source(wd: DType, bias: DType | null, residual: boolean): string {
  let decl = "", body = "", store = "";
  for (let c = 0; c < C; c++) body += `    let w${c} = w8(wb${c} + k);\n`;
  for (let r = 0; r < TM; r++) {
    body += `    { let xa = X4[xr${r} + k / 4u]; let xc = X4[xr${r} + k / 4u + 1u];\n`;
    for (let c = 0; c < C; c++) {
      decl += `  var a${r}_${c} = 0.0;\n`;
      body += `      a${r}_${c} = a${r}_${c} + dot(xa, w${c}[0]) + dot(xc, w${c}[1]);\n`;
      const n = `n0 + ${c * WG}u`, at = `(m0 + ${r}u) * N + ${n}`;
      store += `  if (m0 + ${r}u < M && ${n} < N) { Y[pu(6u) + ${at}] = a${r}_${c}` +
        `${bias ? ` + ld_bias(pu(5u) + ${n})` : ""}${residual ? ` + R[pu(7u) + ${at}]` : ""}; }\n`;
    }
    body += "    }\n";
  }
  const wbases = Array.from({ length: C }, (_, c) => `  let wb${c} = pu(4u) + min(n0 + ${c * WG}u, N - 1u) * K;\n`).join("");
  const xrows = Array.from({ length: TM }, (_, r) => `  let xr${r} = pu(3u) / 4u + min(m0 + ${r}u, M - 1u) * (K / 4u);\n`).join("");
  return `${LIBRARY}
@group(0) @binding(1) var<storage, read> X4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> W4: array<vec4<u32>>;
${binding(3, "bias", "read")}${loader("bias", bias ?? "float32")}
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
${residual ? "@group(0) @binding(5) var<storage, read> R: array<f32>;" : ""}
${w8Source(wd)}
@compute @workgroup_size(${WG}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let M = pu(0u); let N = pu(1u); let K = pu(2u);
  let m0 = wid.x * ${TM}u;
  let n0 = wid.y * ${C * WG}u + lid;
${wbases}${xrows}${decl}
  for (var k = 0u; k < K; k = k + 8u) {
${body}  }
${store}}`;
}

/** out = x @ w^T (+ bias) (+ residual) for x [M, K] float32, w [N, K]; callers check `fitsSkinny` first. */
export function skinnyLinear(x: TensorView, w: TensorView, bias: TensorView | null, out: TensorView, residual: TensorView | null = null): void {
  const dev = deviceOf(out);
  const [M, K] = x.shape, N = w.shape[0];
  const key = `skinny_linear:${w.dtype}:${bias ? bias.dtype : "-"}:${residual ? "res" : "-"}`;
  const access = residual ? ["read", "read", "read", "write", "read"] as const : ["read", "read", "read", "write"] as const;
  const prog = dev.dispatcher.program(key, [...access], () => source(w.dtype, bias?.dtype ?? null, residual !== null));
  dev.dispatcher.dispatch(prog, [bufferOf(x), bufferOf(w), bufferOf(bias ?? x), bufferOf(out), ...(residual ? [bufferOf(residual)] : [])],
    [M, N, K, x.offset, w.offset, bias?.offset ?? 0, out.offset, residual?.offset ?? 0], [Math.ceil(M / TM), Math.ceil(N / (C * WG)), 1]);
}
