/**
 * Linear layers with the pre-quantized weights Hugging Face Hub checkpoints ship, dequantized inside
 * the device kernel: GPTQ / AWQ packed integer codes with per-group zero points and scales, and FP8
 * (float8_e4m3fn) weights with one scale per block (DeepSeek-V3, Qwen3-FP8). The layouts are those
 * of AutoGPTQ / GPTQModel, AutoAWQ ("gemm") and DeepSeek's weight_dequant (see KernelSignatures).
 */
import { getKernel } from "../devices/kernels.js";
import { checkSameDevice, empty } from "./ops.js";
import { numel, sameShape } from "./shape.js";
import type { Tensor } from "./tensor.js";

/** How a GPTQ / AWQ weight is packed (KernelSignatures.linearPackedInt). */
export interface PackedIntLayout {
  /** "gptq": qweight [K / (32 / bits), N] packed along K; "awq": qweight [K, N / 8] packed along N in AutoAWQ's order. */
  readonly layout: "gptq" | "awq";
  readonly bits: 4 | 8;
  /** Added to every stored zero point: 1 for GPTQ's v1 checkpoint format (zeros stored minus 1), else 0. */
  readonly zeroOffset: 0 | 1;
}

function rows(op: string, x: Tensor, K: number): Tensor {
  if (x.shape[x.ndim - 1] !== K) throw new RangeError(`${op}: input [${x.shape}] does not end in the weight's ${K} inputs`);
  const x32 = x.dtype === "float32" ? x : x.to("float32");
  return x32.reshape(numel(x.shape.slice(0, -1)), K).contiguous();
}

function checkBias(op: string, bias: Tensor | null, N: number): void {
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== N)) throw new RangeError(`${op}: bias [${bias.shape}] does not match ${N} outputs`);
}

/**
 * x [..., K] @ W^T + bias for a GPTQ / AWQ weight W [N, K]: w[n, k] = (q[k, n] - (z[g, n] +
 * zeroOffset)) * scales[g, n] with g = gIdx[k]. qweight int32 (gptq [K / P, N], awq [K, N / 8]),
 * qzeros int32 [G, N / P], scales float32 [G, N], gIdx int32 [K] (P = 32 / bits codes per word).
 * Returns float32 [..., N]. Throws RangeError on mismatched shapes or dtypes; the kernel throws for
 * a g_idx entry outside [0, G).
 */
export function linearPackedInt(x: Tensor, qweight: Tensor, qzeros: Tensor, scales: Tensor, gIdx: Tensor,
                                format: PackedIntLayout, bias: Tensor | null = null): Tensor {
  const op = "linear_packed_int";
  const device = checkSameDevice(op, x, qweight, qzeros, scales, gIdx, bias);
  const { layout, bits, zeroOffset } = format;
  const P = 32 / bits, K = gIdx.shape[0], [G, N] = scales.shape;
  const qShape = layout === "gptq" ? [K / P, N] : [K, N / P];
  if ((bits !== 4 && bits !== 8) || (layout === "awq" && bits !== 4) || gIdx.ndim !== 1 || scales.ndim !== 2 ||
      qweight.dtype !== "int32" || qzeros.dtype !== "int32" || scales.dtype !== "float32" || gIdx.dtype !== "int32" ||
      !sameShape(qweight.shape, qShape) || !sameShape(qzeros.shape, [G, N / P])) {
    throw new RangeError(`${op}: ${layout} ${bits}-bit weight expects int32 qweight [${qShape}], int32 qzeros [${G}, ${N / P}], float32 scales [G, N], int32 g_idx [K]; got qweight ${qweight.dtype} [${qweight.shape}], qzeros ${qzeros.dtype} [${qzeros.shape}], scales ${scales.dtype} [${scales.shape}], g_idx ${gIdx.dtype} [${gIdx.shape}]`);
  }
  checkBias(op, bias, N);
  const x2 = rows(op, x, K);
  const out = empty([x2.shape[0], N], "float32", device);
  if (out.numel > 0) {
    getKernel("linearPackedInt", device.type)(x2, qweight.contiguous(), qzeros.contiguous(), scales.contiguous(), gIdx.contiguous(),
      bits, layout === "awq", zeroOffset, bias ? bias.contiguous() : null, out);
  }
  return out.reshape(...x.shape.slice(0, -1), N);
}

/**
 * x [..., K] @ W^T + bias for an FP8 block-scaled weight: `weight` int32 [N, K / 4] holds the
 * float8_e4m3fn bytes of W [N, K]; scaleInv float32 [ceil(N / blockN), ceil(K / blockK)] multiplies
 * each block (the checkpoint's weight_scale_inv). Returns float32 [..., N]. Throws RangeError on
 * mismatched shapes or dtypes.
 */
export function linearFp8Block(x: Tensor, weight: Tensor, scaleInv: Tensor, block: readonly [number, number],
                               bias: Tensor | null = null): Tensor {
  const op = "linear_fp8_block";
  const device = checkSameDevice(op, x, weight, scaleInv, bias);
  const [bn, bk] = block, N = weight.shape[0], K = weight.shape[1] * 4;
  const sShape = [Math.ceil(N / bn), Math.ceil(K / bk)];
  if (weight.dtype !== "int32" || weight.ndim !== 2 || scaleInv.dtype !== "float32" || !sameShape(scaleInv.shape, sShape) ||
      !(Number.isInteger(bn) && bn > 0 && Number.isInteger(bk) && bk > 0)) {
    throw new RangeError(`${op}: expected int32 weight words [N, K / 4] and float32 scales [${sShape}] for blocks [${block}], got ${weight.dtype} [${weight.shape}] and ${scaleInv.dtype} [${scaleInv.shape}]`);
  }
  checkBias(op, bias, N);
  const x2 = rows(op, x, K);
  const out = empty([x2.shape[0], N], "float32", device);
  if (out.numel > 0) getKernel("linearFp8Block", device.type)(x2, weight.contiguous(), scaleInv.contiguous(), bn, bk, bias ? bias.contiguous() : null, out);
  return out.reshape(...x.shape.slice(0, -1), N);
}
