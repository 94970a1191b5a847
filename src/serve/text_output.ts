/**
 * The text of one choice as tokens arrive: incremental detokenization (DecodeStream, with the prompt
 * as context so leading spaces come out as decode(prompt + output) gives them) and stop strings,
 * which end the text before them. While streaming, the last (longest stop - 1) characters are
 * held back, so a stop string split over several tokens is never half sent. Without a tokenizer
 * (a checkpoint served by token ids only) the text stays empty.
 */
import { DecodeStream } from "../transformers/decode_stream.js";
import type { PreTrainedTokenizer } from "../transformers/tokenization.js";

export class TextOutput {
  private readonly stream: DecodeStream | null;
  private pending = "";
  private readonly hold: number;
  /** Every character emitted so far. */
  text = "";

  constructor(tokenizer: PreTrainedTokenizer | null, prompt: readonly number[], private readonly stops: readonly string[]) {
    this.stream = tokenizer && new DecodeStream(tokenizer, { skipSpecialTokens: true, promptIds: prompt });
    this.hold = Math.max(0, ...stops.map((s) => s.length - 1));
  }

  /** Add a token: returns the text now safe to send, and whether a stop string was reached. */
  push(token: number): { text: string; stopped: boolean } {
    this.pending += this.stream?.put(token) ?? "";
    let at = -1;
    for (const s of this.stops) {
      const i = this.pending.indexOf(s);
      if (i >= 0 && (at < 0 || i < at)) at = i;
    }
    if (at >= 0) {
      const out = this.pending.slice(0, at);
      this.pending = "";
      this.text += out;
      return { text: out, stopped: true };
    }
    const cut = Math.max(0, this.pending.length - this.hold);
    const out = this.pending.slice(0, cut);
    this.pending = this.pending.slice(cut);
    this.text += out;
    return { text: out, stopped: false };
  }

  /** The sequence ended without a stop string: the held-back rest. */
  flush(): string {
    const out = this.pending + (this.stream?.end() ?? "");
    this.pending = "";
    this.text += out;
    return out;
  }
}
