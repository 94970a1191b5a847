/** tsorch/transformers: Hugging Face-compatible tokenizers, models and generation. */
import "../devices/builtin.js";
import "../hub/local_source.js";
export { AutoModelForCausalLM, type FromPretrainedOptions } from "./auto.js";
export { AutoTokenizer, PreTrainedTokenizer, type ChatMessage, type ChatTemplateOptions, type BatchEncoding } from "./tokenization.js";
export { DecodeStream } from "./decode_stream.js";
export { PreTrainedModel, WeightLoadError, type CausalLMInputs } from "./modeling_utils.js";
export { KVCache, type CacheImplementation } from "./cache_utils.js";
export { type GenerationOptions } from "./generation/utils.js";
export { CAUSAL_LM_ARCHITECTURES, UnsupportedArchitectureError } from "./models/index.js";
