/**
 * Element types a device stores, and their sizes. Names follow PyTorch (torch.float32 ->
 * "float32"). tensor/dtype.ts re-exports these and adds parsing and type promotion.
 */
export type DType = "float32" | "float16" | "bfloat16" | "int32" | "int64" | "bool";

export const DTYPES: readonly DType[] = ["float32", "float16", "bfloat16", "int32", "int64", "bool"];

const ITEMSIZE: Record<DType, number> = {
  float32: 4, float16: 2, bfloat16: 2, int32: 4, int64: 8, bool: 1,
};

/** Bytes per element. */
export function itemsize(dtype: DType): number {
  return ITEMSIZE[dtype];
}
