/**
 * The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian
 * header length N, N bytes of JSON header { name: { dtype, shape, data_offsets: [begin, end] },
 * "__metadata__"?: {…} }, then the data section; offsets are relative to the data section.
 * Checkpoints are one `model.safetensors` or shards listed by `model.safetensors.index.json`.
 *
 * readSafetensors memory-maps files by default (the cpu device's native addon): every tensor is a
 * view of the mapping (its own ArrayBuffer, so neither files nor shards over 4 GiB meet Node's
 * typed-array limit), nothing is read until used, and the mapping lives until the last view is
 * collected. Where the addon cannot map (not built, e.g. a webgpu-only install; a runtime without
 * external buffers), or with `map: false`, each tensor is read from the file into its own host
 * buffer (devices/cpu/host_memory.ts) the first time its bytes are asked for.
 *
 * loadCheckpoint maps too, except with `readWeights` (set by model loading for a device that
 * computes on its weights in place, the cpu, when they are used as stored), where it reads: a
 * decode step streams every weight, read buffers sit on 2 MB pages (devices/cpu/host_memory.ts),
 * and a file mapping gets 2 MB entries only where the page cache happens to hold 2 MB folios (on
 * the host measured, ext4 on Linux 6.18, 12% of a 1.2 GB checkpoint did): the Qwen3-0.6B-shaped
 * bf16 decode step took 28 ms/token from read weights against 33 ms from the mapping (AMD EPYC
 * Zen 5, 2 threads, compiled). Reading costs ~0.25 s per GB from the page cache and the memory a
 * fully used mapping takes; checkpoints over READ_MAX_RAM_SHARE of the machine's memory are
 * mapped all the same, so that models larger than RAM's comfortable share still load.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync, statSync } from "node:fs";
import { totalmem } from "node:os";
import { constants as bufferConstants } from "node:buffer";
import { join } from "node:path";
import { allocateHost } from "../devices/cpu/host_memory.js";
import { native } from "../devices/cpu/native.js";
import { readJsonObject } from "./config.js";
import { CheckpointError } from "./errors.js";
import {
  assembleShards, elementSize, parseWeightMap, SAFETENSORS_FILE, type RawTensor,
} from "./safetensors_format.js";
import { headerLength, parseHeader, type HeaderEntry } from "./safetensors_header.js";

export { SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, type RawTensor, type StoredDType } from "./safetensors_format.js";

/** loadCheckpoint's `readWeights` reads only checkpoints up to this share of the memory the process may use (a container's limit included). */
export const READ_MAX_RAM_SHARE = 0.5;

/** Bytes of memory this process may use: the machine's, or a container's (cgroup) limit when lower. */
function machineMemory(): number {
  const limit = process.constrainedMemory?.();
  return limit && limit > 0 ? Math.min(limit, totalmem()) : totalmem();
}

/** How readSafetensors gets the bytes. */
export interface ReadOptions {
  /** Memory-map the file (default true); false reads each tensor, once, when its bytes are first asked for (as done where mapping is impossible). */
  map?: boolean;
}

/**
 * The tensors of a .safetensors file, by name in header order (`__metadata__` is skipped). Only
 * the header is read here; the header is validated as the safetensors library does (see
 * safetensors_header.ts). Throws CheckpointError naming the file and the rule broken: cannot
 * open, too short, header length beyond the file or over 100 MB, header not UTF-8 / JSON / an
 * object, unknown dtype, invalid shape or data_offsets, byte length ≠ prod(shape) × dtype size,
 * offsets that overlap, leave holes or run past the file, bytes after the last tensor, a dtype
 * tsorch does not load (see LOADABLE_DTYPES), or a tensor larger than
 * Node's largest typed array.
 */
export function readSafetensors(file: string, opts: ReadOptions = {}): Map<string, RawTensor> {
  const entries = readHeader(file);
  const big = entries.find((t) => t.nbytes > bufferConstants.MAX_LENGTH);
  if (big) throw new CheckpointError(`${file}: tensor "${big.name}" is ${big.nbytes} bytes, more than Node's largest typed array (${bufferConstants.MAX_LENGTH} bytes)`);
  const mapped = opts.map === false ? undefined : mapTensors(file, entries);
  const tensors = new Map<string, RawTensor>();
  entries.forEach((t, i) => {
    const { name, dtype, shape } = t;
    let read: Uint8Array | undefined;
    tensors.set(name, mapped ? { name, dtype, shape, bytes: mapped[i] } : {
      name, dtype, shape, get bytes() { return (read ??= readRange(file, t.offset, t.nbytes)); },
    });
  });
  return tensors;
}

/** `fn` of `file` opened for reading; the file is closed again. Throws CheckpointError when it cannot be opened. */
function withFile<T>(file: string, fn: (fd: number) => T): T {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (e) {
    throw new CheckpointError(`cannot open ${file}: ${(e as Error).message}`);
  }
  try {
    return fn(fd);
  } finally {
    closeSync(fd);
  }
}

/** Read and validate the header of `file`. */
function readHeader(file: string): HeaderEntry[] {
  return withFile(file, (fd) => {
    const size = fstatSync(fd).size;
    const first8 = readExactly(fd, file, 0, Math.min(8, size));
    const n = headerLength(file, first8, size);
    return parseHeader(file, readExactly(fd, file, 8, n), size);
  });
}

/**
 * Views of the tensors over a memory mapping of `file`, or undefined where it cannot be mapped
 * (addon not built, no external buffers, a filesystem without mmap): the caller then reads
 * tensors from the file, which reports any real problem with it. Tensors whose offset is not a
 * multiple of their element size are copied into aligned memory, since kernels read whole elements.
 */
function mapTensors(file: string, entries: HeaderEntry[]): Uint8Array[] | undefined {
  let buffers: ArrayBuffer[];
  try {
    buffers = native().mapRegions(file, entries.map((t) => t.offset), entries.map((t) => t.nbytes));
  } catch {
    return undefined;
  }
  return entries.map((t, i) => {
    const view = new Uint8Array(buffers[i]);
    if (t.offset % elementSize(t.dtype) === 0) return view;
    const aligned = allocateHost(t.nbytes);
    aligned.set(view);
    return aligned;
  });
}

/** `nbytes` bytes of `file` from `offset`, in a fresh aligned buffer. */
function readRange(file: string, offset: number, nbytes: number): Uint8Array {
  return withFile(file, (fd) => readExactly(fd, file, offset, nbytes));
}

/** Read `nbytes` at `offset` of an open file into a fresh buffer (huge pages when large). */
function readExactly(fd: number, file: string, offset: number, nbytes: number): Uint8Array {
  const bytes = allocateHost(nbytes);
  for (let done = 0; done < nbytes;) {
    const n = readSync(fd, bytes, done, Math.min(nbytes - done, 1 << 30), offset + done);
    if (n === 0) throw new CheckpointError(`${file}: file shrank while being read (${offset + done} of ${offset + nbytes} bytes)`);
    done += n;
  }
  return bytes;
}

/**
 * Read the tensors of the checkpoint in `dir`: the shards listed by model.safetensors.index.json
 * (its weight_map; result in weight_map order) if present, else model.safetensors (`file` and
 * `indexFile` name others, e.g. diffusers' diffusion_pytorch_model.safetensors). Only headers are
 * read here. With `readWeights` each tensor is read into host memory when its bytes are first
 * used, else the files are mapped (see above). Throws CheckpointError when neither file exists
 * (saying what was looked for), a shard file is missing, a shard lacks a tensor the index assigns to it, or any file is malformed.
 */
export async function loadCheckpoint(dir: string, file = SAFETENSORS_FILE, indexFile = `${file}.index.json`,
  opts: { readWeights?: boolean } = {}): Promise<Map<string, RawTensor>> {
  const read = (paths: string[]): ReadOptions => {
    const bytes = paths.reduce((n, p) => n + statSync(p).size, 0);
    return { map: !(opts.readWeights && bytes <= READ_MAX_RAM_SHARE * machineMemory()) };
  };
  const index = join(dir, indexFile);
  if (existsSync(index)) {
    const weightMap = await readWeightMap(index);
    const names = [...new Set(Object.values(weightMap))], paths = names.map((shard) => join(dir, shard));
    for (const path of paths) if (!existsSync(path)) throw new CheckpointError(`${index}: missing shard file ${path}`);
    const how = read(paths);
    return assembleShards(weightMap, new Map(names.map((shard, i) => [shard, readSafetensors(paths[i], how)])), index);
  }
  const single = join(dir, file);
  if (existsSync(single)) return readSafetensors(single, read([single]));
  throw new CheckpointError(`no safetensors checkpoint in ${dir}: looked for ${file} and ${indexFile}`);
}

/** The weight_map of a model.safetensors.index.json: tensor name → shard file name. Throws CheckpointError. */
export async function readWeightMap(indexFile: string): Promise<Record<string, string>> {
  return parseWeightMap(await readJsonObject(indexFile), indexFile);
}
