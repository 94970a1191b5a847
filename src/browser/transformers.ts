/**
 * tsorch/transformers in browsers (package.json "exports", condition "browser"): the API of
 * ../transformers/index.ts; models and tokenizers load from a URL base or a Hub id over fetch,
 * cached with the Cache API (../hub/fetch_source.ts).
 */
import "./environment.js";
export { AutoModelForCausalLM, type FromPretrainedOptions } from "../transformers/auto.js";
export { AutoTokenizer, PreTrainedTokenizer, type ChatMessage, type ChatTemplateOptions, type BatchEncoding } from "../transformers/tokenization.js";
export { DecodeStream } from "../transformers/decode_stream.js";
export { PreTrainedModel, WeightLoadError, type CausalLMInputs } from "../transformers/modeling_utils.js";
export { KVCache, type CacheImplementation } from "../transformers/cache_utils.js";
export { type GenerationOptions } from "../transformers/generation/utils.js";
export { CAUSAL_LM_ARCHITECTURES, UnsupportedArchitectureError } from "../transformers/models/index.js";
