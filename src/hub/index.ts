/** hub/: model folders and the Hugging Face Hub — resolve ids, read config.json, load safetensors. */
export { CheckpointError, HubError } from "./errors.js";
export { readSafetensors, loadCheckpoint, readWeightMap, SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, type RawTensor, type ReadOptions } from "./safetensors.js";
export { readJsonFile, loadConfig, loadGenerationConfig, type JsonObject } from "./config.js";
export { resolveModel, type ResolveOptions } from "./resolve.js";
export { hubCacheDir } from "./cache.js";
