/**
 * Which arguments of each kernel it writes (devices/kernels.ts KernelSignatures: `out`, `dst`,
 * `values`/`indices`, `stateOut`, the paged KV pools, …); every other view argument is read.
 * Capture refuses (graph break) an op missing here, since its side effects would be unknown.
 */
import type { OpName } from "../devices/kernels.js";

export const WRITTEN_ARGS: Readonly<Partial<Record<OpName, readonly number[]>>> = {
  copy: [1], unary: [2], binary: [3], where: [3], reduce: [2], cumsum: [1], softmax: [1],
  linear: [3], gatherLinear: [3], matmul: [2], sdpa: [4], pagedAttention: [6], pagedKVWrite: [2, 3],
  rmsNorm: [2], causalConv1d: [3, 4], gatedDeltaRule: [6, 7], layerNorm: [3], rotary: [3],
  embedding: [2], conv2d: [3], groupNorm: [3], upsampleNearest2d: [1], dequantMxfp4: [2], quantizeBlocks: [2, 3], linearQuantized: [5], sort: [1, 2], topk: [2, 3], fusedElementwise: [2], linearGroup: [3], rotaryKVWrite: [1, 6, 7],
  linearAdd: [4], linearQuantizedGroup: [5],
  linearArgmax: [3], pagedAttentionLinearAdd: [10], linearGroupLinearAdd: [7],
  linearGroupQuantized: [3], linearAddQuantized: [4], linearArgmaxQuantized: [3], normRotaryKVWrite: [1, 6, 7],
  // (Made only by the eager front-end outside traces, never captured; listed for completeness.)
  decodeAttention: [3, 4, 5, 9, 10, 16],
};
