/**
 * Loaders of the components diffusers pipelines name in model_index.json: transformers text
 * encoders and tokenizers, schedulers (scheduler_config.json, by `_class_name`; an unknown class
 * is refused naming the supported ones) and the diffusers models SD uses (UNet, VAE).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { readJsonObject } from "../hub/config.js";
import { CLIPTextModel } from "../transformers/models/clip_text.js";
import { AutoencoderKL } from "./models/autoencoder_kl.js";
import { UNet2DConditionModel } from "./models/unet_2d_condition.js";
import { PreTrainedTokenizer } from "../transformers/tokenization.js";
import { loadModelComponent, PipelineLoadError, registerComponent, SCHEDULER_COMPONENT, type ComponentContext } from "./pipeline_utils.js";
import { schedulerFromConfig, type SchedulerMixin } from "./schedulers/scheduling_utils.js";

/** A scheduler component: `<dir>/scheduler_config.json`. Throws PipelineLoadError when absent or unsupported. */
export async function loadScheduler(ctx: ComponentContext): Promise<SchedulerMixin> {
  const file = join(ctx.dir, "scheduler_config.json");
  if (!existsSync(file)) throw new PipelineLoadError(`component '${ctx.name}': missing ${file}`);
  try {
    return schedulerFromConfig(await readJsonObject(file));
  } catch (e) {
    throw new PipelineLoadError(`component '${ctx.name}' (${file}): ${(e as Error).message}`, { cause: e });
  }
}

/** A tokenizer component (tokenizer.json, or CLIP's vocab.json + merges.txt). */
export async function loadTokenizer(ctx: ComponentContext): Promise<PreTrainedTokenizer> {
  try {
    return await PreTrainedTokenizer.fromPretrained(ctx.dir);
  } catch (e) {
    throw new PipelineLoadError(`component '${ctx.name}' (${ctx.dir}): ${(e as Error).message}`, { cause: e });
  }
}

registerComponent("CLIPTextModel", (ctx) => loadModelComponent(ctx, (config) => new CLIPTextModel(config)));
registerComponent("CLIPTokenizer", loadTokenizer);
registerComponent("CLIPTokenizerFast", loadTokenizer);
registerComponent(SCHEDULER_COMPONENT, loadScheduler);
registerComponent("UNet2DConditionModel", (ctx) => loadModelComponent(ctx, (config) => new UNet2DConditionModel(config)));
registerComponent("AutoencoderKL", (ctx) => loadModelComponent(ctx, (config) => new AutoencoderKL(config)));
