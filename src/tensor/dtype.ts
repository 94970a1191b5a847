/**
 * Data types. Names follow PyTorch (torch.float32 -> "float32"); aliases such as "fp32", "f32",
 * "bf16", "half" and "long" are accepted by {@link parseDType}. The names and sizes live in
 * devices/dtype.ts (kernels need them too) and are re-exported here.
 */
import { DTYPES, type DType } from "../devices/dtype.js";

export { DTYPES, itemsize, type DType } from "../devices/dtype.js";

const ALIASES: Record<string, DType> = {
  float32: "float32", float: "float32", fp32: "float32", f32: "float32",
  float16: "float16", half: "float16", fp16: "float16", f16: "float16",
  bfloat16: "bfloat16", bf16: "bfloat16",
  int32: "int32", int: "int32", i32: "int32",
  int64: "int64", long: "int64", i64: "int64",
  bool: "bool",
};

export function isFloating(dtype: DType): boolean {
  return dtype === "float32" || dtype === "float16" || dtype === "bfloat16";
}

/** Parse a dtype name or alias; throws "unknown dtype X; supported: …". */
export function parseDType(name: string): DType {
  const d = ALIASES[name.toLowerCase().replace(/^torch\./, "")];
  if (!d) throw new Error(`unknown dtype '${name}'; supported: ${DTYPES.join(", ")}`);
  return d;
}

/**
 * Result dtype of a binary op (PyTorch's type promotion for tensor-tensor ops): bool < int32 <
 * int64 < float16/bfloat16 < float32; float16 with bfloat16 gives float32.
 */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  const rank = (d: DType) => ({ bool: 0, int32: 1, int64: 2, float16: 3, bfloat16: 3, float32: 4 })[d];
  if (rank(a) === 3 && rank(b) === 3) return "float32";
  return rank(a) >= rank(b) ? a : b;
}
