/**
 * Which transformers tokenizer class AutoTokenizer.from_pretrained builds for a folder (transformers 5.18,
 * models/auto/tokenization_auto.py). The class matters because most classes rebuild the tokenizer on load
 * (see tokenizer_rewrites.ts); TokenizersBackend (PreTrainedTokenizerFast) takes tokenizer.json as it is.
 */

/** TOKENIZER_MAPPING_NAMES of transformers 5.18 for the model types tsorch supports (absent: none registered). */
const REGISTERED: Readonly<Record<string, string>> = {
  mistral: "TokenizersBackend", // MistralCommonBackend only with mistral-common installed and a tekken.json
  mixtral: "TokenizersBackend",
  gemma: "GemmaTokenizer",
  gemma2: "GemmaTokenizer",
  gemma3: "GemmaTokenizer",
  gemma3_text: "GemmaTokenizer",
  qwen2: "Qwen2Tokenizer",
  qwen3: "Qwen2Tokenizer",
  qwen3_moe: "Qwen2Tokenizer",
  qwen3_5: "Qwen3_5Tokenizer",
  qwen3_5_moe: "Qwen3_5Tokenizer",
  qwen3_5_text: "Qwen3_5Tokenizer",
  qwen3_5_moe_text: "Qwen3_5Tokenizer",
  phi3: "TokenizersBackend",
  gpt2: "GPT2Tokenizer",
  deepseek_v3: "TokenizersBackend",
  glm4_moe: "TokenizersBackend",
};

/** MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS, restricted to the model types above: their Hub tokenizer_class is overruled. */
const INCORRECT_HUB_CLASS = new Set(["deepseek_v3", "phi3", "qwen2", "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text"]);

/** Class names that mean "tokenizer.json as it is" (aliases of TokenizersBackend). */
const GENERIC = new Set(["TokenizersBackend", "PreTrainedTokenizerFast", "PreTrainedTokenizer", "PythonBackend", "MistralCommonBackend"]);

/**
 * The class AutoTokenizer picks, with "Fast" dropped (LlamaTokenizerFast is LlamaTokenizer in transformers 5):
 * a registered class that differs from the Hub's tokenizer_class wins only for the model types whose Hub class is
 * known to be wrong, a generic class on either side gives TokenizersBackend, then tokenizer_config.json's
 * tokenizer_class, then config.json's, then the model type's registered class, else TokenizersBackend.
 * @param hubClass tokenizer_config.json's tokenizer_class
 * @param modelType config.json's model_type ("" or undefined without a config.json)
 * @param configClass config.json's tokenizer_class
 */
export function tokenizerClass(hubClass: string | undefined, modelType: string | undefined, configClass?: string): string {
  const base = (name: string) => name.replace(/Fast$/, "");
  const named = (name: string) => (GENERIC.has(name) || GENERIC.has(base(name)) ? "TokenizersBackend" : base(name));
  const hub = hubClass ?? configClass;
  const registered = modelType ? REGISTERED[modelType] : undefined;
  if (hub !== undefined && registered !== undefined && base(registered) !== base(hub)) {
    if (GENERIC.has(registered)) return "TokenizersBackend";
    return named(INCORRECT_HUB_CLASS.has(modelType!) ? registered : hub);
  }
  if (hubClass !== undefined) return named(hubClass);
  if (configClass !== undefined) return named(configClass);
  return registered !== undefined ? named(registered) : "TokenizersBackend";
}
