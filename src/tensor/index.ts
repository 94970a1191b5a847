/** The tensor API: Tensor, dtypes, creation and every op (the PyTorch-like front-end). */
export { Tensor, type TensorLike } from "./tensor.js";
export { type DType, DTYPES, parseDType, itemsize, isFloating, promoteTypes } from "./dtype.js";
export { type HostArray } from "./host.js";
export * from "./creation.js";
export * from "./ops.js";
export * from "./spatial.js";
export { tidy, keep } from "./scope.js";
export { siluMul, gatedMlpResidual, linearResidual, normLinears, rotaryCacheWrite, type RmsNormParams } from "./fused.js";
export { decodeAttentionPlan, decodeAttentionResidual, type DecodeAttentionHeads, type DecodeAttentionPlan, type DecodeAttentionRoom, type DecodeAttentionStep, type ProjectionWeight } from "./fused_attention.js";
