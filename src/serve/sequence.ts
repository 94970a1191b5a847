/**
 * One sequence the engine generates (an OpenAI choice: a request with n = 3 is three sequences):
 * its tokens, its KV blocks and how many of its positions are in the cache, its sampling settings,
 * and the listener that receives each new token.
 */

/** Sampling settings of one sequence (OpenAI / vLLM request fields, resolved). */
export interface SamplingParams {
  /** New tokens at most. */
  maxTokens: number;
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  /** 0 = off. */
  topK: number;
  minP: number;
  presencePenalty: number;
  frequencyPenalty: number;
  repetitionPenalty: number;
  /** Seed of this sequence's sampler; undefined = time-based. */
  seed?: number;
  /** Stop strings (the text is cut before them). */
  stop: string[];
  /** Token ids that end the sequence (EOS), unless ignoreEos. */
  stopTokenIds: number[];
  ignoreEos: boolean;
  /** Log-probabilities of the chosen token and this many alternatives; undefined = none. */
  logprobs?: number;
}

export type FinishReason = "stop" | "length" | "abort";

/** What the engine reports for each new token. */
export interface TokenEvent {
  token: number;
  /** Log-probability of `token` and the top alternatives (when requested). */
  logprob?: number;
  top?: { token: number; logprob: number }[];
  /** Set on the sequence's last event. */
  finish?: FinishReason;
}

/** A listener's answer to a token: "stop" ends the sequence there (e.g. a stop string was found). */
export type TokenListener = (e: TokenEvent) => "stop" | void;

export type SequenceStatus = "waiting" | "running" | "finished";

export class Sequence {
  status: SequenceStatus = "waiting";
  readonly output: number[] = [];
  /** KV blocks of positions [i * blockSize, (i + 1) * blockSize). */
  blocks: number[] = [];
  /** Hashes of the full blocks registered so far (blocks [0, blockHashes.length)). */
  blockHashes: string[] = [];
  /** Positions whose keys/values are in the cache. */
  computed = 0;
  /** Prompt positions found in the prefix cache when it was scheduled. */
  cachedPrompt = 0;
  readonly arrival = performance.now();
  firstTokenAt = 0;
  lastTokenAt = 0;
  finishReason: FinishReason | undefined;

  constructor(
    readonly id: number,
    readonly prompt: readonly number[],
    readonly params: SamplingParams,
    readonly onToken: TokenListener,
  ) {}

  /** Every token so far (prompt, then output). */
  get tokens(): number[] { return this.output.length ? [...this.prompt, ...this.output] : (this.prompt as number[]); }
  get length(): number { return this.prompt.length + this.output.length; }
  get finished(): boolean { return this.status === "finished"; }
}
