/**
 * The safetensors format (https://github.com/huggingface/safetensors), parsed from bytes already in
 * memory: an 8-byte little-endian header length N, N bytes of JSON header { name: { dtype, shape,
 * data_offsets: [begin, end] }, "__metadata__"?: {…} }, then the data section; offsets are relative
 * to the data section. Sharded checkpoints list their shards in model.safetensors.index.json.
 * No file system here: browsers fetch whole files and parse them with parseSafetensors
 * (./fetch_source.ts); Node memory-maps them (./safetensors.ts). Both validate headers with
 * ./safetensors_header.ts and assemble shards with these functions.
 */
import { itemsize, type DType } from "../tensor/dtype.js";
import { CheckpointError } from "./errors.js";
import { headerLength, parseHeader } from "./safetensors_header.js";

/**
 * A stored tensor's dtype: a tensor dtype, or "uint8" (raw bytes, e.g. MXFP4 blocks and scales,
 * which only a model that knows their format reads), or "float8_e4m3fn" (FP8 weights of block-scaled
 * checkpoints, which only transformers/quantization_config.ts reads).
 */
export type StoredDType = DType | "uint8" | "float8_e4m3fn";

/** One tensor of a checkpoint, not yet on a device. */
export interface RawTensor {
  /** The state_dict name, e.g. "model.layers.0.self_attn.q_proj.weight". */
  name: string;
  dtype: StoredDType;
  shape: number[];
  /**
   * The tensor's bytes, row-major, little-endian, aligned to the element size: a view of the file's
   * bytes (memory-mapped in Node, fetched in browsers; an unaligned tensor, valid per the format,
   * is copied into aligned memory), or, where mapping is impossible, a fresh buffer read from the
   * file at each access. Do not modify them.
   */
  bytes: Uint8Array;
}

/** Name of the single-file checkpoint in a model folder. */
export const SAFETENSORS_FILE = "model.safetensors";
/** Name of the index of a sharded checkpoint in a model folder. */
export const SAFETENSORS_INDEX_FILE = "model.safetensors.index.json";

/**
 * Parse a whole .safetensors file held in `buf` into a Map from tensor name to RawTensor, in header
 * order (the `__metadata__` entry is skipped); the tensors view `buf`, except tensors whose offset
 * is not a multiple of their element size (valid per the format), which are copied into aligned
 * memory, since kernels read whole elements. `file` names the file in errors. The header is
 * validated as the safetensors library does (./safetensors_header.ts); throws CheckpointError
 * naming the file and the rule broken.
 */
export function parseSafetensors(buf: Uint8Array, file: string): Map<string, RawTensor> {
  const n = headerLength(file, buf.subarray(0, 8), buf.length);
  const tensors = new Map<string, RawTensor>();
  for (const t of parseHeader(file, buf.subarray(8, 8 + n), buf.length)) {
    const view = buf.subarray(t.offset, t.offset + t.nbytes);
    const aligned = (buf.byteOffset + t.offset) % elementSize(t.dtype) === 0;
    tensors.set(t.name, { name: t.name, dtype: t.dtype, shape: t.shape, bytes: aligned ? view : view.slice() });
  }
  return tensors;
}

/** Bytes per element of a stored dtype. */
export function elementSize(dtype: StoredDType): number {
  return dtype === "uint8" || dtype === "float8_e4m3fn" ? 1 : itemsize(dtype);
}

/**
 * The weight_map of a parsed model.safetensors.index.json (tensor name → shard file name).
 * `indexFile` names the file in errors. Throws CheckpointError when weight_map is not such an object.
 */
export function parseWeightMap(index: unknown, indexFile: string): Record<string, string> {
  const weightMap = (index as { weight_map?: unknown } | null)?.weight_map;
  if (typeof weightMap !== "object" || weightMap === null || Array.isArray(weightMap) ||
      !Object.values(weightMap).every((v) => typeof v === "string")) {
    throw new CheckpointError(`${indexFile}: "weight_map" must be an object of tensor name → shard file name`);
  }
  return weightMap as Record<string, string>;
}

/**
 * The tensors of a sharded checkpoint, in weight_map order, from the parsed shards (shard file name
 * → its tensors). Throws CheckpointError when a shard lacks a tensor the index assigns to it.
 */
export function assembleShards(weightMap: Record<string, string>, shards: Map<string, Map<string, RawTensor>>,
  indexFile: string): Map<string, RawTensor> {
  const tensors = new Map<string, RawTensor>();
  for (const [name, shard] of Object.entries(weightMap)) {
    const tensor = shards.get(shard)?.get(name);
    if (!tensor) throw new CheckpointError(`${indexFile}: tensor "${name}" is assigned to ${shard}, which does not contain it`);
    tensors.set(name, tensor);
  }
  return tensors;
}
