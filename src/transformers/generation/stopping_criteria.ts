/**
 * Stop strings (transformers' StopStringCriteria): a sequence stops when its text contains one of
 * the strings ending within its last token's text. Each check decodes only the sequence's tail, a
 * window of tokens that holds the longest stop string's length in characters before the last token
 * (plus slack for a window that starts inside a character or loses a leading space to the
 * decoder), so a step costs the same at token 10 and at token 10 000.
 */
import type { GenerationTokenizer } from "./configuration_utils.js";

/** Characters of extra context decoded before the longest stop string needs it. */
const SLACK = 4;

export class StopStringCriteria {
  private readonly longest: number;

  constructor(private readonly tokenizer: GenerationTokenizer, private readonly stops: readonly string[]) {
    this.longest = Math.max(0, ...stops.map((s) => s.length));
  }

  /**
   * True when `ids` ends a stop string: the row's tokens, prompt included, the newest last; its
   * tokens before `start` (left padding) are not part of the text.
   */
  matches(ids: readonly number[], start = 0): boolean {
    const len = ids.length - start, need = this.longest - 1 + SLACK;
    if (!this.stops.length || len <= 0) return false;
    const decode = (from: number, to: number) => this.tokenizer.decode(ids.slice(start + from, start + to) as number[]);
    let n = Math.min(len, this.longest + 1);
    let before = decode(len - n, len - 1);
    while (before.length < need && n < len) {
      n = Math.min(len, 2 * n);
      before = decode(len - n, len - 1);
    }
    const text = decode(len - n, len), prior = before.length;
    return this.stops.some((st) => {
      const at = text.indexOf(st, Math.max(0, prior - st.length + 1));
      return at >= 0 && at + st.length > prior;
    });
  }
}
