/**
 * Where a model's files come from — a local folder or the Hub cache in Node (./local_source.ts), a
 * URL base or the Hub over fetch in a browser (./fetch_source.ts). The package entry point of each
 * environment installs its source with setModelSource; transformers/ reads model files only through
 * modelSource(), so it never touches a file system or the network itself.
 */
import type { JsonObject } from "./config.js";
import { CheckpointError } from "./errors.js";
import type { RawTensor } from "./safetensors_format.js";

/** Progress of one file's download: `loaded` bytes of `total` (undefined when the server gives no length). */
export interface DownloadProgress {
  file: string;
  loaded: number;
  total?: number;
}

/** Options every source accepts; a source ignores those that do not apply to it. */
/** The option keys a model or pipeline source reads (SourceOptions, and ResolveOptions on Node), for loaders that refuse unknown options. */
export const SOURCE_OPTION_KEYS = ["revision", "cacheDir", "progress", "onProgress", "endpoint", "accessToken", "fetch"] as const;

export interface SourceOptions {
  /** Branch, tag or commit hash on the Hub (default "main"). */
  revision?: string;
  /** Node: cache root of the Hugging Face cache. */
  cacheDir?: string;
  /** Node: byte progress bar on stderr while downloading (default true). */
  progress?: boolean;
  /** Called as file bytes arrive (browser: every fetched file; Node: not called). */
  onProgress?: (p: DownloadProgress) => void;
}

/**
 * ModelSource.loadCheckpoint's options: the source options, and (Node, local checkpoints) whether
 * to read each tensor into host memory when first used instead of memory-mapping the files
 * (hub/safetensors.ts loadCheckpoint's `readWeights`; model loading sets it for devices with
 * hostMemoryWeights). Default false.
 */
export interface CheckpointOptions extends SourceOptions {
  readWeights?: boolean;
}

export interface ModelSource {
  /**
   * The location of model `pathOrId` (a folder, a URL base ending in "/", …), fetching or
   * downloading what is needed. Throws HubError when it cannot be found.
   */
  resolve(pathOrId: string, opts: SourceOptions): Promise<string>;
  /** How `file` of `location` is named in messages (a path or a URL). */
  filePath(location: string, file: string): string;
  /** The text of `file` in `location`, or undefined when there is no such file. Throws CheckpointError when unreadable. */
  readText(location: string, file: string, opts?: SourceOptions): Promise<string | undefined>;
  /** The safetensors tensors of `location` (single file or sharded). Throws CheckpointError. */
  loadCheckpoint(location: string, opts?: CheckpointOptions): Promise<Map<string, RawTensor>>;
}

let current: ModelSource | undefined;

/** Install the model source of this environment (done once by each package entry point). */
export function setModelSource(source: ModelSource): void {
  current = source;
}

/** The installed model source. Throws when none is (a module imported around the package entry points). */
export function modelSource(): ModelSource {
  if (!current) {
    throw new Error("no model source is installed: import tsorch through its package entry (\"tsorch/transformers\"), " +
      "which installs the file-system source in Node and the fetch source in browsers");
  }
  return current;
}

/** Parse `text` (the contents of `path`) as a JSON object. Throws CheckpointError naming `path`. */
export function parseJsonObject(text: string, path: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new CheckpointError(`${path}: expected a JSON object`);
  return value as JsonObject;
}

/** `file` of `location` parsed as a JSON object, or undefined when absent. Throws CheckpointError. */
export async function readJsonObjectFrom(location: string, file: string, opts?: SourceOptions): Promise<JsonObject | undefined> {
  const src = modelSource();
  const text = await src.readText(location, file, opts);
  return text === undefined ? undefined : parseJsonObject(text, src.filePath(location, file));
}

/** `<location>/config.json`, unchanged (model config classes interpret it). Throws CheckpointError when absent or malformed. */
export async function loadConfigFrom(location: string, opts?: SourceOptions): Promise<JsonObject> {
  const config = await readJsonObjectFrom(location, "config.json", opts);
  if (!config) throw new CheckpointError(`file not found: ${modelSource().filePath(location, "config.json")}`);
  return config;
}

/** `<location>/generation_config.json`, or {} when there is none. Throws CheckpointError when malformed. */
export async function loadGenerationConfigFrom(location: string, opts?: SourceOptions): Promise<JsonObject> {
  return (await readJsonObjectFrom(location, "generation_config.json", opts)) ?? {};
}
