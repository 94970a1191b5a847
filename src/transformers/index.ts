/** tsorch/transformers in Node: Hugging Face-compatible tokenizers, models and generation (the cpu and webgpu devices, models from folders and the Hugging Face cache). */
import "../devices/builtin.js";
import "../hub/local_source.js";
export * from "./api.js";
