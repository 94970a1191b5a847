/**
 * tsorch/hub in browsers (package.json "exports", condition "browser"): safetensors parsing and
 * the fetch + Cache API model source (../hub/fetch_source.ts).
 */
import "./environment.js";
export { CheckpointError, HubError } from "../hub/errors.js";
export { parseSafetensors, parseWeightMap, SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, type RawTensor } from "../hub/safetensors_format.js";
export { fetchSource, fetchBytes, modelBaseUrl, MODEL_CACHE, HUB_ENDPOINT } from "../hub/fetch_source.js";
export { modelSource, setModelSource, type ModelSource, type SourceOptions, type DownloadProgress } from "../hub/source.js";
