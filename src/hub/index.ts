/** hub/: model folders and the Hugging Face Hub — resolve ids, read config.json, load safetensors. */
import "./local_source.js";
export { CheckpointError, HubError } from "./errors.js";
export { readSafetensors, loadCheckpoint, readWeightMap, SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, type RawTensor, type StoredDType, type ReadOptions } from "./safetensors.js";
export { readJsonFile, loadConfig, loadGenerationConfig, type JsonObject } from "./config.js";
export { resolveModel, type ResolveOptions } from "./resolve.js";
export { hubCacheDir } from "./cache.js";
export { parseSafetensors, parseWeightMap } from "./safetensors_format.js";
export { modelSource, setModelSource, type ModelSource, type SourceOptions, type DownloadProgress } from "./source.js";
export { resolvePipeline, pipelineComponents, MODEL_INDEX_FILE, COMPONENT_WEIGHT_FILES } from "./pipeline.js";
