/**
 * AutoModelForCausalLM (transformers' auto classes): resolve a local folder or Hub id, read
 * config.json, pick the architecture, load the safetensors weights onto the device.
 */
import { openDevice } from "../devices/registry.js";
import { checkKnownOptions } from "./generation/configuration_utils.js";
import { loadConfigFrom, loadGenerationConfigFrom, modelSource, SOURCE_OPTION_KEYS, type SourceOptions } from "../hub/source.js";
import { isWeightQuantization, quantizeLinears } from "../nn/quantized.js";
import { isFloating, parseDType, type DType } from "../tensor/dtype.js";
import type { PreTrainedModel } from "./modeling_utils.js";
import { causalLMClass } from "./models/index.js";
import { hubQuantization, prepareHubWeights } from "./quantization_config.js";

export interface FromPretrainedOptions extends SourceOptions {
  /** Device string: "cpu" (default), "webgpu", … */
  device?: string;
  /**
   * Weight dtype: "float32", "bfloat16", "float16", or "auto" (default: as stored in the checkpoint);
   * or "int8" / "int4": every Linear whose input size is a multiple of 32 is quantized at
   * load as llama.cpp's q8_0 / q4_0 (nn/quantized.ts), the other weights kept as stored.
   */
  dtype?: DType | "auto" | string;
}

export class AutoModelForCausalLM {
  /**
   * Load a causal LM from a folder or Hub id (Node), or a URL base or Hub id (browsers; see
   * hub/source.ts for where files come from). Throws: model not found / not downloadable,
   * unsupported architecture (naming the supported ones), unknown device or dtype, malformed
   * config or checkpoint, missing/unexpected/mis-shaped weights.
   */
  static async fromPretrained(pathOrId: string, opts: FromPretrainedOptions = {}): Promise<PreTrainedModel> {
    checkKnownOptions("fromPretrained", opts, ["device", "dtype", ...SOURCE_OPTION_KEYS]);
    const quantize = isWeightQuantization(opts.dtype) ? opts.dtype : null;
    const weightDtypes = "auto, float32, bfloat16, float16, int8, int4";
    let dtype: DType | undefined;
    try {
      dtype = opts.dtype === undefined || opts.dtype === "auto" || quantize ? undefined : parseDType(opts.dtype);
    } catch {
      throw new Error(`unknown dtype '${opts.dtype}'; supported: ${weightDtypes}`);
    }
    if (dtype && !isFloating(dtype)) throw new Error(`dtype '${opts.dtype}' is not a weight dtype; supported: ${weightDtypes}`);
    const device = await openDevice(opts.device ?? "cpu");
    const source = modelSource();
    const dir = await source.resolve(pathOrId, opts);
    const config = await loadConfigFrom(dir, opts);
    const Model = causalLMClass(config);
    const model = new Model(config);
    model.generationConfig = await loadGenerationConfigFrom(dir, opts);
    // Pre-quantized checkpoints (GPTQ, AWQ, FP8 block-scaled) load as they are (quantization_config.ts).
    const hubQuant = hubQuantization(config);
    if (hubQuant && quantize) throw new Error(`dtype '${quantize}' quantizes float checkpoints; ${pathOrId} is already quantized (${hubQuant.method})`);
    // int8 / int4 are quantized on cpu (quantizeBlocks is a cpu kernel), then moved to the device.
    const loadDevice = quantize ? await openDevice("cpu") : device;
    // Weights a device computes on in place are read into its memory; converted ones (quantized,
    // or another dtype) and uploads to other devices come from the file mapping.
    const readWeights = loadDevice.hostMemoryWeights === true && !quantize && !hubQuant && dtype === undefined;
    const weights = await source.loadCheckpoint(dir, { ...opts, readWeights });
    model.loadWeights(hubQuant ? prepareHubWeights(model, hubQuant, weights) : weights, loadDevice, dtype);
    if (quantize) quantizeLinears(model, quantize, device);
    if (loadDevice !== device) await model.to(device);
    return model;
  }
}
