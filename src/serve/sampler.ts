/**
 * Next-token choice for one sequence from its row of logits (host Float32Array [vocab]), with the
 * OpenAI / vLLM sampling fields: repetition penalty (transformers' RepetitionPenaltyLogitsProcessor,
 * over prompt and output), presence / frequency penalties (OpenAI: logit -= presence * [count > 0]
 * + frequency * count, over the output), then temperature, top-k, top-p and min-p (the warpers of
 * transformers' logits_process.py), then a draw; temperature 0 is greedy.
 */
import { argmaxRow, repetitionPenalty, samplingWarpers, warp, type LogitsProcessor, type Warper } from "../transformers/generation/logits_process.js";
import { Random } from "../transformers/generation/rng.js";
import type { SamplingParams } from "./sequence.js";

/** The per-sequence sampler: its processors and its seeded random generator. */
export class Sampler {
  private readonly procs: LogitsProcessor[] = [];
  private readonly warpers: Warper[];
  private readonly rng: Random;

  constructor(private readonly p: SamplingParams) {
    if (p.repetitionPenalty !== 1) this.procs.push(repetitionPenalty(p.repetitionPenalty));
    this.warpers = p.temperature > 0 ? samplingWarpers(p) : [];
    this.rng = new Random(p.seed ?? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)));
  }

  /** True when the choice is the plain argmax of the logits (no row needs to reach the host). */
  get greedy(): boolean {
    return this.p.temperature === 0 && this.procs.length === 0 && this.p.presencePenalty === 0 && this.p.frequencyPenalty === 0;
  }

  /** Choose the next token from `row` (modified in place) given the prompt and the output so far. */
  choose(row: Float32Array, prompt: readonly number[], output: readonly number[]): number {
    if (this.procs.length) {
      const all = output.length ? [...prompt, ...output] : prompt;
      for (const f of this.procs) f(row, all);
    }
    if (this.p.presencePenalty !== 0 || this.p.frequencyPenalty !== 0) {
      const counts = new Map<number, number>();
      for (const t of output) counts.set(t, (counts.get(t) ?? 0) + 1);
      for (const [t, c] of counts) row[t] -= this.p.presencePenalty + this.p.frequencyPenalty * c;
    }
    if (this.p.temperature === 0) return argmaxRow(row);
    return this.rng.sample(row, warp(row, this.warpers));
  }
}
