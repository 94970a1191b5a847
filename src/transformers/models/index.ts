/**
 * The architectures tsorch runs, keyed by config.json `architectures[0]` (model_type is the
 * fallback key). One modeling file per architecture family, named after transformers' file.
 */
import type { RawConfig } from "../configuration.js";
import type { PreTrainedModel } from "../modeling_utils.js";
import { DeepseekV3ForCausalLM } from "./deepseek_v3.js";
import { GemmaForCausalLM } from "./gemma.js";
import { Gemma2ForCausalLM } from "./gemma2.js";
import { Gemma3ForCausalLM } from "./gemma3.js";
import { Gemma4ForCausalLM, Gemma4ForConditionalGeneration } from "./gemma4.js";
import { Glm4MoeForCausalLM } from "./glm4_moe.js";
import { GPT2LMHeadModel } from "./gpt2.js";
import { GptOssForCausalLM } from "./gpt_oss.js";
import { LlamaForCausalLM, MistralForCausalLM } from "./llama.js";
import { MixtralForCausalLM } from "./mixtral.js";
import { Phi3ForCausalLM } from "./phi3.js";
import { Qwen2ForCausalLM } from "./qwen2.js";
import { Qwen3ForCausalLM } from "./qwen3.js";
import { Qwen3MoeForCausalLM } from "./qwen3_moe.js";
import { Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration } from "./qwen3_5.js";
import { Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration } from "./qwen3_5_moe.js";
import { SmolLM3ForCausalLM } from "./smollm3.js";

export type CausalLMClass = new (config: RawConfig) => PreTrainedModel;

export const CAUSAL_LM_ARCHITECTURES: Record<string, CausalLMClass> = {
  LlamaForCausalLM,
  MistralForCausalLM,
  MixtralForCausalLM,
  Qwen2ForCausalLM,
  Qwen3ForCausalLM,
  Phi3ForCausalLM,
  GPT2LMHeadModel,
  Qwen3MoeForCausalLM,
  Qwen3_5ForCausalLM,
  Qwen3_5ForConditionalGeneration,
  Qwen3_5MoeForCausalLM,
  Qwen3_5MoeForConditionalGeneration,
  GemmaForCausalLM,
  Gemma2ForCausalLM,
  Gemma3ForCausalLM,
  Gemma4ForCausalLM,
  Gemma4ForConditionalGeneration,
  SmolLM3ForCausalLM,
  Glm4MoeForCausalLM,
  DeepseekV3ForCausalLM,
  GptOssForCausalLM,
};

const MODEL_TYPES: Record<string, string> = {
  llama: "LlamaForCausalLM",
  mistral: "MistralForCausalLM",
  mixtral: "MixtralForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  phi3: "Phi3ForCausalLM",
  gpt2: "GPT2LMHeadModel",
  qwen3_moe: "Qwen3MoeForCausalLM",
  qwen3_5_text: "Qwen3_5ForCausalLM",
  qwen3_5: "Qwen3_5ForConditionalGeneration",
  qwen3_5_moe_text: "Qwen3_5MoeForCausalLM",
  qwen3_5_moe: "Qwen3_5MoeForConditionalGeneration",
  gemma: "GemmaForCausalLM",
  gemma2: "Gemma2ForCausalLM",
  gemma3_text: "Gemma3ForCausalLM",
  gemma4_text: "Gemma4ForCausalLM",
  gemma4: "Gemma4ForConditionalGeneration",
  smollm3: "SmolLM3ForCausalLM",
  glm4_moe: "Glm4MoeForCausalLM",
  deepseek_v3: "DeepseekV3ForCausalLM",
  gpt_oss: "GptOssForCausalLM",
};

export class UnsupportedArchitectureError extends Error {}

/** The class for a config; throws "unsupported architecture X; supported: …". */
export function causalLMClass(config: RawConfig): CausalLMClass {
  const archs = Array.isArray(config.architectures) ? (config.architectures as string[]) : [];
  for (const a of archs) if (CAUSAL_LM_ARCHITECTURES[a]) return CAUSAL_LM_ARCHITECTURES[a];
  const byType = MODEL_TYPES[config.model_type as string];
  if (byType && archs.length === 0) return CAUSAL_LM_ARCHITECTURES[byType];
  const name = archs[0] ?? config.model_type ?? "(none given in config.json)";
  throw new UnsupportedArchitectureError(`unsupported architecture ${name}; supported: ${Object.keys(CAUSAL_LM_ARCHITECTURES).join(", ")}`);
}
