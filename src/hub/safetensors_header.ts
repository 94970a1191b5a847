/**
 * Validation of a safetensors header, rule for rule as the safetensors library (Rust,
 * safetensors/src/tensor.rs: `SafeTensors::read_metadata` and `Metadata::validate`) does it:
 * - the 8-byte little-endian header length N is at most 100,000,000 and 8 + N fits in the file;
 * - the header is UTF-8 and a JSON object (leading and trailing whitespace allowed);
 * - "__metadata__", if present, maps strings to strings;
 * - every other entry is { dtype, shape, data_offsets: [begin, end] } with a dtype of the format,
 *   a shape of non-negative integers and integer offsets;
 * - sorted by offsets, the tensors tile the data section exactly: each begins where the previous
 *   one ends (no overlap, no hole), the last ends at the end of the file, and each one's byte
 *   length is prod(shape) × the dtype's size (whole bytes for sub-byte dtypes).
 * Every violation throws a one-line CheckpointError "<file>: <rule>".
 */
import type { StoredDType } from "./safetensors_format.js";
import { CheckpointError } from "./errors.js";

/** The safetensors library's limit on the header length (MAX_HEADER_SIZE). */
export const MAX_HEADER_BYTES = 100_000_000;

/** Bits per element of every dtype of the format, and the tsorch dtype of those tsorch loads. */
const FORMAT_DTYPES: Record<string, { bits: number; dtype?: StoredDType }> = {
  BOOL: { bits: 8, dtype: "bool" }, F4: { bits: 4 }, F6_E2M3: { bits: 6 }, F6_E3M2: { bits: 6 },
  U8: { bits: 8, dtype: "uint8" }, I8: { bits: 8 }, F8_E5M2: { bits: 8 }, F8_E4M3: { bits: 8, dtype: "float8_e4m3fn" }, F8_E8M0: { bits: 8 },
  I16: { bits: 16 }, U16: { bits: 16 }, F16: { bits: 16, dtype: "float16" }, BF16: { bits: 16, dtype: "bfloat16" },
  I32: { bits: 32, dtype: "int32" }, U32: { bits: 32 }, F32: { bits: 32, dtype: "float32" }, C64: { bits: 64 },
  F64: { bits: 64 }, I64: { bits: 64, dtype: "int64" }, U64: { bits: 64 },
};

/** The format's dtype names that tsorch loads, e.g. for error messages. */
export const LOADABLE_DTYPES = ["F32", "F16", "BF16", "I32", "I64", "BOOL", "U8", "F8_E4M3"];

/** One tensor of a validated header. */
export interface HeaderEntry {
  name: string;
  dtype: StoredDType;
  shape: number[];
  /** Offset of the tensor's first byte in the file (8 + N + begin). */
  offset: number;
  nbytes: number;
}

/**
 * Decode and validate `header`, the N header bytes (after the 8-byte length) of the safetensors
 * file `file` of `fileSize` bytes. Returns the tensors in header order. Throws CheckpointError naming `file` and the rule broken, also for
 * a tensor of a dtype the format has but tsorch cannot load (F64, F8_E5M2, …).
 */
export function parseHeader(file: string, header: Uint8Array, fileSize: number): HeaderEntry[] {
  const fail = failure(file);
  const dataStart = 8 + header.length;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(header);
  } catch {
    throw fail("header is not valid UTF-8");
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw fail(`header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw fail("header is not a JSON object");

  const entries: (HeaderEntry & { begin: number; end: number; format: string })[] = [];
  for (const [name, entry] of Object.entries(json as Record<string, unknown>)) {
    const what = `tensor ${JSON.stringify(name)}`;
    if (name === "__metadata__") {
      if (entry !== null && (typeof entry !== "object" || Array.isArray(entry) ||
          !Object.values(entry as object).every((v) => typeof v === "string"))) {
        throw fail(`"__metadata__" must map strings to strings, got ${clip(JSON.stringify(entry))}`);
      }
      continue;
    }
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
      throw fail(`${what} must be an object with dtype, shape and data_offsets, got ${clip(JSON.stringify(entry))}`);
    }
    const { dtype, shape, data_offsets: offsets } = entry as Record<string, unknown>;
    const format = typeof dtype === "string" ? FORMAT_DTYPES[dtype] : undefined;
    if (!format) throw fail(`${what} has unknown dtype ${clip(JSON.stringify(dtype))} (the format's dtypes: ${Object.keys(FORMAT_DTYPES).join(", ")})`);
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw fail(`${what} has an invalid shape ${clip(JSON.stringify(shape))} (must be a list of non-negative integers)`);
    }
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0)) {
      throw fail(`${what} has invalid data_offsets ${clip(JSON.stringify(offsets))} (must be [begin, end], non-negative integers)`);
    }
    const [begin, end] = offsets as [number, number];
    if (end < begin) throw fail(`${what} has invalid data_offsets [${begin}, ${end}] (end before begin)`);
    let elements = 1;
    for (const d of shape as number[]) elements *= d;
    const bits = elements * format.bits;
    if (!Number.isSafeInteger(bits)) throw fail(`${what}: shape [${shape.join(", ")}] has too many elements`);
    if (bits % 8 !== 0) throw fail(`${what}: shape [${shape.join(", ")}] of ${dtype} is not a whole number of bytes`);
    const nbytes = bits / 8;
    if (end - begin !== nbytes) {
      throw fail(`${what}: data_offsets [${begin}, ${end}] hold ${end - begin} bytes but shape [${shape.join(", ")}] of ${dtype} needs ${nbytes}`);
    }
    entries.push({ name, format: dtype as string, dtype: format.dtype!, shape: shape as number[], offset: dataStart + begin, nbytes, begin, end });
  }

  // The data section is tiled exactly by the tensors, taken in the order of their offsets.
  const dataLength = fileSize - dataStart;
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let covered = 0, previous = "";
  for (const t of sorted) {
    const what = `tensor ${JSON.stringify(t.name)}`;
    if (t.begin < covered) throw fail(`${what}: data_offsets [${t.begin}, ${t.end}] overlap tensor ${JSON.stringify(previous)}, which ends at ${covered}`);
    if (t.begin > covered) throw fail(`${what}: data_offsets [${t.begin}, ${t.end}] leave a hole: bytes [${covered}, ${t.begin}) of the data section belong to no tensor`);
    if (t.end > dataLength) {
      throw fail(`truncated data: ${what} ends at byte ${t.end} of the data section but only ${dataLength} bytes follow the header`);
    }
    covered = t.end;
    previous = t.name;
  }
  if (covered !== dataLength) {
    throw fail(`the tensors cover ${covered} bytes but ${dataLength} bytes follow the header: the data section must end with the last tensor`);
  }
  const unloadable = entries.find((t) => !t.dtype);
  if (unloadable) {
    throw fail(`tensor ${JSON.stringify(unloadable.name)} has unsupported dtype "${unloadable.format}" (supported: ${LOADABLE_DTYPES.join(", ")})`);
  }
  return entries.map(({ name, dtype, shape, offset, nbytes }) => ({ name, dtype, shape, offset, nbytes }));
}

/** The length N of the header, from the file's first 8 bytes; throws unless 8 + N fits in `fileSize`. */
export function headerLength(file: string, first8: Uint8Array, fileSize: number): number {
  const fail = failure(file);
  if (fileSize < 8) throw fail(`file is ${fileSize} bytes, shorter than the 8-byte header length`);
  const n = new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER_BYTES)) throw fail(`header length ${n} exceeds the format's limit of ${MAX_HEADER_BYTES} bytes`);
  if (n > BigInt(fileSize - 8)) throw fail(`header length ${n} goes beyond the end of the file (${fileSize} bytes)`);
  return Number(n);
}

/** A CheckpointError "<file>: <msg>" on one line (JSON parser messages can quote raw newlines). */
function failure(file: string): (msg: string) => CheckpointError {
  return (msg) => new CheckpointError(`${file}: ${msg}`.replace(/[\r\n\u2028\u2029]+/g, " "));
}

function clip(s: string | undefined): string {
  return s === undefined ? "undefined" : s.length > 60 ? `${s.slice(0, 57)}...` : s;
}
