/** The tsorch/transformers API, free of environment setup (the Node and browser entries install devices and a model source, then re-export this). */
export { AutoModelForCausalLM, type FromPretrainedOptions } from "./auto.js";
export { AutoTokenizer, PreTrainedTokenizer, type ChatMessage, type ChatTemplateOptions, type BatchEncoding } from "./tokenization.js";
export { DecodeStream } from "./decode_stream.js";
export { PreTrainedModel, WeightLoadError, type CausalLMInputs } from "./modeling_utils.js";
export { KVCache, type CacheImplementation } from "./cache_utils.js";
export { GenerationOptionError, type FinishReason, type GenerationOptions } from "./generation/configuration_utils.js";
export { type GenerateOutput, type GenerationStream } from "./generation/utils.js";
export { CAUSAL_LM_ARCHITECTURES, UnsupportedArchitectureError } from "./models/index.js";
