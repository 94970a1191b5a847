/** torch.nn.GroupNorm with affine weight [C] and bias [C], named as in PyTorch. */
import { groupNorm } from "../tensor/spatial.js";
import type { Tensor } from "../tensor/tensor.js";
import { Module, type Parameter } from "./module.js";

/** forward(x [N, C, ...]) -> float32 of x's shape, normalised per group of C / numGroups channels. */
export class GroupNorm extends Module {
  readonly weight: Parameter | null;
  readonly bias: Parameter | null;
  constructor(readonly numGroups: number, readonly numChannels: number, readonly eps = 1e-5, affine = true) {
    super();
    if (!Number.isInteger(numGroups) || numGroups < 1 || numChannels % numGroups !== 0) {
      throw new RangeError(`GroupNorm: num_groups=${numGroups} must divide num_channels=${numChannels}`);
    }
    this.weight = affine ? this.param("weight", [numChannels]) : null;
    this.bias = affine ? this.param("bias", [numChannels]) : null;
  }
  forward(x: Tensor): Tensor {
    return groupNorm(x, this.numGroups, this.weight?.value ?? null, this.bias?.value ?? null, this.eps);
  }
}
