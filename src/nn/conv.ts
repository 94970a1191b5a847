/**
 * torch.nn.Conv2d: weight [out, in / groups, kh, kw] and bias [out], named as in PyTorch (and
 * diffusers checkpoints). Activations are float32; the weight stays in the dtype it was loaded in.
 */
import { conv2d } from "../tensor/spatial.js";
import type { Tensor } from "../tensor/tensor.js";
import { Module, type Parameter } from "./module.js";

export interface Conv2dConfig {
  stride?: number | [number, number];
  padding?: number | [number, number];
  dilation?: number | [number, number];
  groups?: number;
  /** Default true. */
  bias?: boolean;
}

/** 2-D convolution layer; forward(x [N, in, H, W]) -> float32 [N, out, Ho, Wo] (see tensor conv2d). */
export class Conv2d extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter | null;
  readonly kernelSize: [number, number];
  constructor(readonly inChannels: number, readonly outChannels: number, kernelSize: number | [number, number], readonly config: Conv2dConfig = {}) {
    super();
    const groups = config.groups ?? 1;
    if (!Number.isInteger(groups) || groups < 1 || inChannels % groups !== 0 || outChannels % groups !== 0) {
      throw new RangeError(`Conv2d: groups=${groups} must divide in_channels=${inChannels} and out_channels=${outChannels}`);
    }
    this.kernelSize = typeof kernelSize === "number" ? [kernelSize, kernelSize] : kernelSize;
    this.weight = this.param("weight", [outChannels, inChannels / groups, ...this.kernelSize]);
    this.bias = config.bias === false ? null : this.param("bias", [outChannels]);
  }
  forward(x: Tensor): Tensor {
    const { stride, padding, dilation, groups } = this.config;
    return conv2d(x, this.weight.value, this.bias?.value ?? null, { stride, padding, dilation, groups });
  }
}
