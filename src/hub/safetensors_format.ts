/**
 * The safetensors format (https://github.com/huggingface/safetensors), parsed from bytes already in
 * memory: an 8-byte little-endian header length N, N bytes of JSON header { name: { dtype, shape,
 * data_offsets: [begin, end] }, "__metadata__"?: {…} }, then the data section; offsets are relative
 * to the data section. Sharded checkpoints list their shards in model.safetensors.index.json.
 * No file system here: Node reads files into a buffer (./safetensors.ts), browsers fetch them
 * (./fetch_source.ts); both parse with these functions.
 */
import { itemsize, type DType } from "../tensor/dtype.js";
import { CheckpointError } from "./errors.js";

/**
 * A stored tensor's dtype: a tensor dtype, or "uint8" (raw bytes, e.g. MXFP4 blocks and scales,
 * which only a model that knows their format reads).
 */
export type StoredDType = DType | "uint8";

/** One tensor of a checkpoint, not yet on a device. */
export interface RawTensor {
  /** The state_dict name, e.g. "model.layers.0.self_attn.q_proj.weight". */
  name: string;
  dtype: StoredDType;
  shape: number[];
  /**
   * The tensor's bytes, row-major, little-endian: a view into one buffer that holds the whole file,
   * so `bytes.byteOffset` is the data's offset in the file (no per-tensor copy). The offset is
   * aligned to the element size when the writer padded the header to 8 bytes, as the Python
   * safetensors library does, but the format does not promise it.
   */
  bytes: Uint8Array;
}

/** Name of the single-file checkpoint in a model folder. */
export const SAFETENSORS_FILE = "model.safetensors";
/** Name of the index of a sharded checkpoint in a model folder. */
export const SAFETENSORS_INDEX_FILE = "model.safetensors.index.json";

const DTYPES: Record<string, StoredDType> = {
  F32: "float32", F16: "float16", BF16: "bfloat16", I32: "int32", I64: "int64", BOOL: "bool", U8: "uint8",
};

/**
 * Parse a whole .safetensors file held in `buf` into a Map from tensor name to RawTensor, in header
 * order (the `__metadata__` entry is skipped); the tensors view `buf`. `file` names the file in
 * errors. Throws CheckpointError when the file is too short, the header length exceeds the file,
 * the header is not JSON, a dtype is not one of F32/F16/BF16/I32/I64/BOOL/U8, a shape or data_offsets
 * entry is invalid or disagrees with shape × dtype size, or the data section is truncated.
 */
export function parseSafetensors(buf: Uint8Array, file: string): Map<string, RawTensor> {
  const fail = (msg: string) => new CheckpointError(`${file}: ${msg}`);
  if (buf.length < 8) throw fail(`file is ${buf.length} bytes, shorter than the 8-byte header length`);
  const headerLength = new DataView(buf.buffer, buf.byteOffset, 8).getBigUint64(0, true);
  if (headerLength > BigInt(buf.length - 8)) {
    throw fail(`header length ${headerLength} goes beyond the end of the file (${buf.length} bytes)`);
  }
  const dataStart = 8 + Number(headerLength);
  const dataLength = buf.length - dataStart;
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder().decode(buf.subarray(8, dataStart)));
  } catch (e) {
    throw fail(`header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) throw fail("header is not a JSON object");

  const tensors = new Map<string, RawTensor>();
  for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") continue;
    const { dtype, shape, data_offsets: offsets } = (entry ?? {}) as Record<string, unknown>;
    const dt = typeof dtype === "string" ? DTYPES[dtype] : undefined;
    if (!dt) {
      throw fail(`tensor "${name}" has unsupported dtype ${JSON.stringify(dtype)} (supported: ${Object.keys(DTYPES).join(", ")})`);
    }
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw fail(`tensor "${name}" has an invalid shape ${JSON.stringify(shape)}`);
    }
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) ||
        offsets[0] > offsets[1]) {
      throw fail(`tensor "${name}" has invalid data_offsets ${JSON.stringify(offsets)}`);
    }
    const [begin, end] = offsets as [number, number];
    const nbytes = (shape as number[]).reduce((a, b) => a * b, 1) * (dt === "uint8" ? 1 : itemsize(dt));
    if (end - begin !== nbytes) {
      throw fail(`tensor "${name}": data_offsets [${begin}, ${end}] hold ${end - begin} bytes but shape ` +
        `[${shape.join(", ")}] of ${dtype} needs ${nbytes}`);
    }
    if (end > dataLength) {
      throw fail(`truncated data: tensor "${name}" ends at byte ${end} of the data section but only ` +
        `${dataLength} bytes follow the header`);
    }
    tensors.set(name, { name, dtype: dt, shape, bytes: new Uint8Array(buf.buffer, buf.byteOffset + dataStart + begin, nbytes) });
  }
  return tensors;
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
