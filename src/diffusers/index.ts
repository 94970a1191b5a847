/**
 * tsorch/diffusers in Node: Hugging Face diffusers pipelines from their original folders or Hub ids
 * (model_index.json + per-component configs, safetensors and tokenizer files), on any device.
 */
import "../devices/builtin.js";
import "../hub/local_source.js";
import "./components.js";
export {
  DiffusionPipeline, PipelineLoadError, registerPipeline, registerComponent, loadModelComponent, supportedPipelines,
  parseWeightDtype, SCHEDULER_COMPONENT, type DiffusionCallOptions, type DiffusionOutput, type PipelineLoadOptions, type ComponentContext, type ComponentLoader, type PipelineClass,
} from "./pipeline_utils.js";
export { loadScheduler, loadTokenizer } from "./components.js";
export {
  SchedulerMixin, SchedulerConfigError, registerScheduler, schedulerClass, schedulerFromConfig, supportedSchedulers,
  alphasCumprod, type SchedulerConfig, type SchedulerOutput,
} from "./schedulers/scheduling_utils.js";
export { DDIMScheduler } from "./schedulers/scheduling_ddim.js";
export { EulerDiscreteScheduler } from "./schedulers/scheduling_euler_discrete.js";
export { UNet2DConditionModel } from "./models/unet_2d_condition.js";
export { AutoencoderKL } from "./models/autoencoder_kl.js";
export { StableDiffusionPipeline, type StableDiffusionCallOptions } from "./pipelines/pipeline_stable_diffusion.js";
export { FlowMatchEulerDiscreteScheduler, calculateShift, type FlowMatchEulerDiscreteConfig, type FlowMatchSetTimestepsOptions } from "./schedulers/scheduling_flow_match_euler_discrete.js";
export { FluxTransformer2DModel, type FluxTransformerInputs } from "./models/transformer_flux.js";
export { FluxPipeline, packLatents, unpackLatents, latentImageIds, type FluxCallOptions } from "./pipelines/pipeline_flux.js";
export { T5EncoderModel } from "../transformers/models/t5_encoder.js";
export { ModelMixin, cfgNum, perBlock, refuseOption } from "./models/modeling_utils.js";
export { PipelineImage, denormalizeToNHWC, numpyToPil } from "./image_processor.js";
export { randn } from "./randn.js";
export { CLIPTextModel, type CLIPTextOutput } from "../transformers/models/clip_text.js";
export { PreTrainedTokenizer } from "../transformers/tokenization.js";
