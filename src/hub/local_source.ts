/**
 * The model source of Node: a local folder, or a Hub id resolved to (and downloaded into) the
 * Hugging Face cache; files are read from the file system. Importing this module installs it
 * (the Node entry points do).
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { CheckpointError } from "./errors.js";
import { resolveModel } from "./resolve.js";
import { loadCheckpoint } from "./safetensors.js";
import { setModelSource, type ModelSource } from "./source.js";

export const localSource: ModelSource = {
  resolve: (pathOrId, opts) => resolveModel(pathOrId, { revision: opts.revision, cacheDir: opts.cacheDir, progress: opts.progress }),
  filePath: join,
  async readText(dir, file) {
    const path = join(dir, file);
    if (!existsSync(path)) return undefined;
    try {
      return await readFile(path, "utf8");
    } catch (e) {
      throw new CheckpointError(`cannot read ${path}: ${(e as Error).message}`);
    }
  },
  loadCheckpoint: (dir, opts) => loadCheckpoint(dir, undefined, undefined, { readWeights: opts?.readWeights }),
};

setModelSource(localSource);
