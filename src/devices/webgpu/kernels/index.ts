/**
 * The webgpu kernel table: every op of devices/kernels.ts but quantizeBlocks (weights are quantized
 * on cpu), linearQuantizedGroup (a cpu decode fusion: tensor/ops runs linearQuantized per weight
 * where a device has none) and the quantized-weight forms of compile's fused linears (cpu only:
 * their passes leave quantized linears alone on webgpu).
 */
import type { KernelSignatures, OpName } from "../../kernels.js";
import { attentionKernels } from "./attention.js";
import { elementwiseKernels } from "./elementwise.js";
import { gatedDeltaKernels } from "./gated_delta.js";
import { gatherKernels } from "./gather.js";
import { linearArgmaxKernels } from "./linear_argmax.js";
import { linearGroupKernels } from "./linear_group.js";
import { matmulKernels } from "./matmul.js";
import { mlpLinearAddKernels } from "./mlp_linear_add.js";
import { mxfp4Kernels } from "./mxfp4.js";
import { normKernels } from "./norm.js";
import { pagedAttentionKernels } from "./paged_attention.js";
import { pagedAttentionOutKernels } from "./paged_attention_out.js";
import { quantLinearKernels } from "./quant_linear.js";
import { reduceKernels } from "./reduce.js";
import { rotaryKVWriteKernels } from "./rotary_kv_write.js";
import { sortKernels } from "./sort.js";
import { spatialKernels } from "./spatial.js";

export const webgpuKernels: Omit<KernelSignatures, "quantizeBlocks" | "moeExperts" | "linearQuantizedGroup"
  | "linearGroupQuantized" | "linearAddQuantized" | "linearArgmaxQuantized" | "normRotaryKVWrite" | "decodeAttention"> = {
  ...elementwiseKernels,
  ...reduceKernels,
  ...matmulKernels,
  ...linearGroupKernels,
  ...linearArgmaxKernels,
  ...mlpLinearAddKernels,
  ...rotaryKVWriteKernels,
  ...attentionKernels,
  ...pagedAttentionKernels,
  ...pagedAttentionOutKernels,
  ...normKernels,
  ...spatialKernels,
  ...gatherKernels,
  ...gatedDeltaKernels,
  ...sortKernels,
  ...mxfp4Kernels,
  ...quantLinearKernels,
};

/** Ops whose WGSL kernels read and write float32 KV block pools only (declared with restrictPoolDtypes). */
export const FLOAT32_POOL_OPS: readonly OpName[] = ["pagedAttention", "pagedKVWrite", "rotaryKVWrite", "pagedAttentionLinearAdd"];
