/**
 * Stacked expert weights as gpt-oss checkpoints store them (transformers' GptOssExperts): for each
 * projection `name`, `${name}` [E, in, out], input-major (x @ W), and a bias `${name}_bias` [E, out].
 * `matrices()` gives each expert's weight as a contiguous out × in matrix, the layout gatherLinear
 * takes, made on the weights' device on first use and kept until the parameters change (after
 * `model.to(...)`): a transposed copy, so expert weight memory doubles.
 */
import { tidy, keep } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { Module, type Parameter } from "./module.js";

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
  weight: Parameter;
  bias: Parameter;
}

export class ExpertWeights extends Module {
  private readonly stored: Stored[];
  private cache: { sources: Tensor[]; matrices: ExpertMatrices } | null = null;

  constructor(readonly numExperts: number, projections: ExpertProjection[]) {
    super();
    this.stored = projections.map((proj) => ({
      proj,
      weight: this.param(proj.name, [numExperts, proj.in, proj.out]),
      bias: this.param(`${proj.name}_bias`, [numExperts, proj.out]),
    }));
  }

  /** Each expert's out × in matrix per projection, and the biases (see the file comment). */
  matrices(): ExpertMatrices {
    const sources = this.stored.flatMap((s) => [s.weight.value, s.bias.value]);
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
    return s.weight.value.select(0, e).transpose(0, 1).contiguous();
  }
}
