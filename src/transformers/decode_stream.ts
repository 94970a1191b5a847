/**
 * Streaming detokenization for generation: token ids go in one at a time, finished text comes out.
 * Like transformers' TextStreamer it decodes the accumulated ids each step and emits the new suffix (but
 * never restarts at a newline, which makes TextStreamer drop the next token's SentencePiece space), so
 * leading spaces and multi-token characters come out exactly as decode() gives them; text ending in
 * U+FFFD (a character whose UTF-8 bytes have not all arrived) is held back until it completes.
 */
import type { PreTrainedTokenizer } from "./tokenization.js";

const REPLACEMENT_CHAR = "\uFFFD";

/** Options of {@link DecodeStream}. */
export interface DecodeStreamOptions {
  /** Drop special tokens, as decode's skipSpecialTokens (default false). */
  skipSpecialTokens?: boolean;
  /** Ids that precede the streamed ones (the prompt): decoded as context, never emitted. */
  promptIds?: readonly number[];
}

/**
 * Incremental decoder. The pieces returned by put() and end() concatenate to
 * `decode(promptIds + ids).slice(decode(promptIds).length)`, i.e. to decode(ids) without a prompt.
 * Cost: one decode of the whole sequence per put().
 */
export class DecodeStream {
  private readonly ids: number[];
  private readonly skipSpecialTokens: boolean;
  /** Text already emitted, including the prompt's. */
  private emitted: string;

  constructor(
    private readonly tokenizer: Pick<PreTrainedTokenizer, "decode">,
    opts: DecodeStreamOptions = {},
  ) {
    this.ids = [...(opts.promptIds ?? [])];
    this.skipSpecialTokens = opts.skipSpecialTokens ?? false;
    this.emitted = this.decodeAll();
  }

  /** Adds token ids; returns the text they complete ("" while a character is still incomplete). */
  put(ids: number | readonly number[]): string {
    if (typeof ids === "number") this.ids.push(ids);
    else this.ids.push(...ids);
    const text = this.decodeAll();
    if (text.endsWith(REPLACEMENT_CHAR) || !text.startsWith(this.emitted)) return "";
    return this.take(text);
  }

  /**
   * Ends the stream: returns what is still held back (a trailing U+FFFD of truly invalid bytes). Returns ""
   * if the decoder rewrote text already emitted (only invalid byte runs can make it do so).
   */
  end(): string {
    const text = this.decodeAll();
    if (!text.startsWith(this.emitted)) return "";
    return this.take(text);
  }

  private take(text: string): string {
    const piece = text.slice(this.emitted.length);
    this.emitted = text;
    return piece;
  }

  private decodeAll(): string {
    return this.tokenizer.decode(this.ids, { skipSpecialTokens: this.skipSpecialTokens });
  }
}
