/**
 * MXFP4 dequantization (transformers' convert_moe_packed_tensors): one thread per packed byte,
 * which holds two e2m1 codes (low nibble first); the block's scale byte is an exponent biased by
 * 127. Blocks and scales are int32 tensors whose words hold the packed bytes (devices/kernels.ts).
 */
import type { KernelSignatures } from "../../kernels.js";
import type { TensorView } from "../../view.js";
import { grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { binding, entry, LIBRARY } from "./wgsl.js";

const WG = 256;

function dequantMxfp4(blocks: TensorView, scales: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const [rows, nb] = blocks.shape, S = scales.shape[1];
  const bytes = rows * nb * 16;
  const prog = dev.dispatcher.program("dequantMxfp4", ["read", "read", "write"], () => `${LIBRARY}
${binding(1, "B", "read")}${binding(2, "SC", "read")}@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
const FP4 = array<f32, 8>(0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0);
fn byte_at(w: u32, i: u32) -> u32 { return (w >> ((i & 3u) * 8u)) & 0xffu; }
fn fp4(c: u32) -> f32 { return select(FP4[c & 7u], -FP4[c & 7u], (c & 8u) != 0u); }
${entry(WG)} {
  let i = group_id(wid, nwg) * ${WG}u + lid;
  if (i >= pu(0u)) { return; }
  let nb = pu(1u);
  let r = i / (nb * 16u);
  let g = (i / 16u) % nb;
  let code = byte_at(B[pu(3u) + i / 4u], i);
  let si = r * pu(2u) * 4u + g;
  let scale = ldexp(1.0, i32(byte_at(SC[pu(4u) + si / 4u], si)) - 127);
  let o = pu(5u) + (r * nb + g) * 32u + (i % 16u) * 2u;
  Y[o] = fp4(code & 15u) * scale;
  Y[o + 1u] = fp4(code >> 4u) * scale;
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(blocks), bufferOf(scales), bufferOf(out)],
    [bytes, nb, S, blocks.offset, scales.offset, out.offset], grid(bytes, WG));
}

export const mxfp4Kernels: Pick<KernelSignatures, "dequantMxfp4"> = { dequantMxfp4 };
