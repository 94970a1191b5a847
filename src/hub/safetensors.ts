/**
 * safetensors checkpoints from the file system (Node): one `model.safetensors` or shards listed by
 * `model.safetensors.index.json`. The format itself is parsed by ./safetensors_format.ts.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync } from "node:fs";
import { constants as bufferConstants } from "node:buffer";
import { join } from "node:path";
import { allocateHost } from "../devices/cpu/host_memory.js";
import { readJsonObject } from "./config.js";
import { CheckpointError } from "./errors.js";
import {
  assembleShards, parseSafetensors, parseWeightMap, SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, type RawTensor,
} from "./safetensors_format.js";

export { SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, type RawTensor, type StoredDType } from "./safetensors_format.js";

/**
 * Read a .safetensors file into a Map from tensor name to RawTensor, in header order (the
 * `__metadata__` entry is skipped). The file is read once into one fresh buffer the tensors view,
 * then parsed by ./safetensors_format.ts (the parser browsers use too). Throws CheckpointError,
 * naming the file, when it cannot be read or is malformed (see parseSafetensors).
 */
export function readSafetensors(file: string): Map<string, RawTensor> {
  return parseSafetensors(readWholeFile(file), file);
}

/**
 * Read the tensors of the checkpoint in `dir`: the shards listed by model.safetensors.index.json
 * (its weight_map; result in weight_map order) if present, else model.safetensors.
 * Throws CheckpointError when neither file exists (saying what was looked for), a shard file is
 * missing, a shard lacks a tensor the index assigns to it, or any file is malformed.
 */
export async function loadCheckpoint(dir: string): Promise<Map<string, RawTensor>> {
  const index = join(dir, SAFETENSORS_INDEX_FILE);
  if (existsSync(index)) {
    const weightMap = await readWeightMap(index);
    const shards = new Map<string, Map<string, RawTensor>>();
    for (const shard of new Set(Object.values(weightMap))) {
      const path = join(dir, shard);
      if (!existsSync(path)) throw new CheckpointError(`${index}: missing shard file ${path}`);
      shards.set(shard, readSafetensors(path));
    }
    return assembleShards(weightMap, shards, index);
  }
  const single = join(dir, SAFETENSORS_FILE);
  if (existsSync(single)) return readSafetensors(single);
  throw new CheckpointError(`no safetensors checkpoint in ${dir}: looked for ${SAFETENSORS_FILE} and ${SAFETENSORS_INDEX_FILE}`);
}

/** The weight_map of a model.safetensors.index.json: tensor name → shard file name. Throws CheckpointError. */
export async function readWeightMap(indexFile: string): Promise<Record<string, string>> {
  return parseWeightMap(await readJsonObject(indexFile), indexFile);
}

/**
 * The whole file in a fresh (unpooled) buffer, so buffer offsets equal file offsets. The buffer is
 * cpu host memory (huge pages where available), since on cpu the weights are used in place.
 */
function readWholeFile(file: string): Buffer {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (e) {
    throw new CheckpointError(`cannot open ${file}: ${(e as Error).message}`);
  }
  try {
    const size = fstatSync(fd).size;
    if (size > bufferConstants.MAX_LENGTH) {
      throw new CheckpointError(`${file}: ${size} bytes exceed the largest buffer Node can allocate (${bufferConstants.MAX_LENGTH})`);
    }
    const bytes = allocateHost(size);
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, size);
    for (let done = 0; done < size;) {
      const n = readSync(fd, buf, done, Math.min(size - done, 1 << 30), done);
      if (n === 0) throw new CheckpointError(`${file}: file shrank while being read`);
      done += n;
    }
    return buf;
  } finally {
    closeSync(fd);
  }
}
