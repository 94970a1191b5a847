/**
 * Stacked expert weights as gpt-oss checkpoints store them (transformers' GptOssExperts): for each
 * projection `name`, `${name}` [E, in, out], input-major (x @ W), and a bias `${name}_bias` [E, out].
 * `matrices()` gives each expert's weight as a contiguous out × in matrix, the layout gatherLinear
 * takes, made on the weights' device on first use and kept until the parameters change (after
 * `model.to(...)`): a transposed copy, so expert weight memory doubles.
 */
import { tidy, keep } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { dequantizeMxfp4 } from "../tensor/ops.js";
import { Module, type Parameter } from "./module.js";

/** Values per MXFP4 block. */
const MXFP4_BLOCK = 32;

/** One stacked projection: `out` × `in` per expert. */
export interface ExpertProjection {
  name: string;
  out: number;
  in: number;
}

/** Per projection name: E out × in matrices, and the bias table [E, out]. */
export interface ExpertMatrices {
  weights: Record<string, Tensor[]>;
  biases: Record<string, Tensor>;
}

interface Stored {
  proj: ExpertProjection;
  /** `${name}`, or `${name}_blocks` and `${name}_scales` (MXFP4). */
  weight: Parameter | { blocks: Parameter; scales: Parameter };
  bias: Parameter;
}

export class ExpertWeights extends Module {
  private readonly stored: Stored[];
  private cache: { sources: Tensor[]; matrices: ExpertMatrices } | null = null;

  /** Throws RangeError when an MXFP4 projection's input size is not a multiple of 32. */
  constructor(readonly numExperts: number, projections: ExpertProjection[], mxfp4: boolean) {
    super();
    const E = numExperts;
    this.stored = projections.map((proj) => {
      if (mxfp4 && proj.in % MXFP4_BLOCK) throw new RangeError(`MXFP4 experts '${proj.name}': input size ${proj.in} is not a multiple of ${MXFP4_BLOCK}`);
      const nb = proj.in / MXFP4_BLOCK;
      return {
        proj,
        weight: mxfp4
          ? { blocks: this.param(`${proj.name}_blocks`, [E, proj.out, nb, 4], "int32"), scales: this.param(`${proj.name}_scales`, [E, proj.out, Math.ceil(nb / 4)], "int32") }
          : this.param(proj.name, [E, proj.in, proj.out]),
        bias: this.param(`${proj.name}_bias`, [E, proj.out]),
      };
    });
  }

  /** Each expert's out × in matrix per projection, and the biases (see the file comment). */
  matrices(): ExpertMatrices {
    const sources = this.stored.flatMap((s) => [...("blocks" in s.weight ? [s.weight.blocks.value, s.weight.scales.value] : [s.weight.value]), s.bias.value]);
    if (this.cache && this.cache.sources.every((t, i) => t === sources[i])) return this.cache.matrices;
    const matrices: ExpertMatrices = { weights: {}, biases: {} };
    for (const s of this.stored) {
      matrices.weights[s.proj.name] = Array.from({ length: this.numExperts }, (_, e) => keep(tidy(() => this.expert(s, e))));
      matrices.biases[s.proj.name] = s.bias.value;
    }
    this.cache = { sources, matrices };
    return matrices;
  }

  private expert(s: Stored, e: number): Tensor {
    if ("blocks" in s.weight) return dequantizeMxfp4(s.weight.blocks.value.select(0, e), s.weight.scales.value.select(0, e)).to("bfloat16");
    return s.weight.value.select(0, e).transpose(0, 1).contiguous();
  }
}
