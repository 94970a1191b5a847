/**
 * The pre-quantized Linear weights of Hugging Face Hub checkpoints, loaded as the files hold them
 * and dequantized inside the device kernel (tensor/quant_hub_ops.ts):
 * - GPTQ (AutoGPTQ / GPTQModel; transformers' quantizer_gptq): qweight, qzeros, scales, g_idx;
 * - AWQ (AutoAWQ "gemm"; transformers' quantizer_awq): qweight, qzeros, scales (g_idx supplied by
 *   the loader as k // group_size);
 * - FP8 block-scaled (DeepSeek-V3, Qwen3-FP8; transformers' quantizer_finegrained_fp8): weight
 *   (float8_e4m3fn bytes, kept as int32 words) and weight_scale_inv.
 */
import { linearFp8Block, linearPackedInt, type PackedIntLayout } from "../tensor/quant_hub_ops.js";
import type { Tensor } from "../tensor/tensor.js";
import type { HubQuantizedWeight } from "./layers.js";
import { Parameter } from "./module.js";

/** A GPTQ or AWQ weight of a Linear [out, in] with `groups` groups of inputs. */
export class PackedIntWeight implements HubQuantizedWeight {
  readonly method: string;
  readonly params: Record<string, Parameter>;
  constructor(readonly format: PackedIntLayout, inFeatures: number, outFeatures: number, groups: number) {
    this.method = format.layout;
    const P = 32 / format.bits;
    this.params = {
      qweight: new Parameter(format.layout === "gptq" ? [inFeatures / P, outFeatures] : [inFeatures, outFeatures / P], "int32"),
      qzeros: new Parameter([groups, outFeatures / P], "int32"),
      scales: new Parameter([groups, outFeatures], "float32"),
      g_idx: new Parameter([inFeatures], "int32"),
    };
  }
  forward(x: Tensor, bias: Tensor | null): Tensor {
    const p = this.params;
    return linearPackedInt(x, p.qweight.value, p.qzeros.value, p.scales.value, p.g_idx.value, this.format, bias);
  }
}

/** An FP8 (e4m3) weight of a Linear [out, in] with one scale per `block` [out, in] tile. */
export class Fp8BlockWeight implements HubQuantizedWeight {
  readonly method = "fp8";
  readonly params: Record<string, Parameter>;
  constructor(readonly block: readonly [number, number], inFeatures: number, outFeatures: number) {
    this.params = {
      weight: new Parameter([outFeatures, inFeatures / 4], "int32"),
      weight_scale_inv: new Parameter([Math.ceil(outFeatures / block[0]), Math.ceil(inFeatures / block[1])], "float32"),
    };
  }
  forward(x: Tensor, bias: Tensor | null): Tensor {
    return linearFp8Block(x, this.params.weight.value, this.params.weight_scale_inv.value, this.block, bias);
  }
}
