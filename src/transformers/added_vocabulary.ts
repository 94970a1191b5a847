/**
 * Splitting text on added tokens as the Rust `tokenizers` crate does (tokenizer/added_vocabulary.rs), with every
 * AddedToken flag: tokens with normalized=false are found in the raw text, tokens with normalized=true in the
 * normalized text around them; matches are leftmost-longest; single_word drops a match inside a word (\w next to
 * it); lstrip / rstrip make the token take the whitespace before / after it; with encodeSpecialTokens (transformers'
 * split_special_tokens) matches of special tokens are dropped, so their text goes through the model.
 */

/** An added token as tokenizer.json (added_tokens) and tokenizer_config.json (added_tokens_decoder) store it. */
export interface AddedToken {
  id: number;
  content: string;
  single_word: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

/** A piece of the split text: an added token (id set) or normalized text for the pre-tokenizer and model. */
export interface Piece {
  text: string;
  id?: number;
  /** The piece starts the original text (offset 0): Metaspace's prepend_scheme "first" prepends ▁ only there. */
  atStart: boolean;
}

/** Rust regex's Unicode \w and \s, which single_word, lstrip and rstrip test. */
const WORD_CHAR = /[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]/u;
const WHITESPACE = /\p{White_Space}/u;

/** Contents → tokens, searched by longest match at a position. */
class Matcher {
  private readonly byContent = new Map<string, AddedToken>();
  private readonly lengths: number[];
  /** First UTF-16 units of the contents: most positions are rejected by one lookup. */
  private readonly firstUnits = new Set<number>();

  constructor(
    tokens: Iterable<[string, AddedToken]>,
    private readonly encodeSpecialTokens: boolean,
  ) {
    for (const [content, token] of tokens) {
      if (content.length === 0) continue;
      this.byContent.set(content, token);
      this.firstUnits.add(content.charCodeAt(0));
    }
    this.lengths = [...new Set([...this.byContent.keys()].map((c) => c.length))].sort((a, b) => b - a);
  }

  get empty(): boolean {
    return this.byContent.size === 0;
  }

  /** The longest token whose content starts at `at`. */
  longestAt(text: string, at: number): AddedToken | undefined {
    if (!this.firstUnits.has(text.charCodeAt(at))) return undefined;
    for (const length of this.lengths) {
      if (at + length > text.length) continue;
      const token = this.byContent.get(text.slice(at, at + length));
      if (token !== undefined) return token;
    }
    return undefined;
  }

  /**
   * Splits text into token and text pieces (Rust's find_matches): non-overlapping leftmost-longest matches, a
   * single_word match discarded when a word character touches it, lstrip/rstrip widening a match over whitespace.
   */
  split(text: string, atStart: boolean): Piece[] {
    const pieces: Piece[] = [];
    let last = 0;
    let at = 0;
    while (at < text.length) {
      const token = this.longestAt(text, at);
      if (token === undefined) {
        at++;
        continue;
      }
      let start = at;
      let stop = at + token.content.length;
      at = stop;
      if (this.encodeSpecialTokens && token.special) continue;
      if (token.single_word) {
        const wordBefore = start > 0 && WORD_CHAR.test(charBefore(text, start));
        const wordAfter = stop < text.length && WORD_CHAR.test(String.fromCodePoint(text.codePointAt(stop)!));
        if (wordBefore || wordAfter) continue;
      }
      if (token.lstrip) {
        while (start > last && WHITESPACE.test(text[start - 1])) start--;
      }
      if (token.rstrip) {
        while (stop < text.length && WHITESPACE.test(text[stop])) stop++;
        at = stop;
      }
      if (last < start) pieces.push({ text: text.slice(last, start), atStart: atStart && last === 0 });
      pieces.push({ text: text.slice(start, stop), id: token.id, atStart: atStart && start === 0 });
      last = stop;
    }
    if (last < text.length) pieces.push({ text: text.slice(last), atStart: atStart && last === 0 });
    return pieces;
  }
}

/** The character (a whole code point) that ends text[0..end). */
function charBefore(text: string, end: number): string {
  const low = text.charCodeAt(end - 1);
  if (low >= 0xdc00 && low <= 0xdfff && end >= 2) return text.slice(end - 2, end);
  return text[end - 1];
}

/** The added tokens of a tokenizer and the two-stage split of Rust's AddedVocabulary::extract_and_normalize. */
export class AddedVocabulary {
  private readonly raw: Matcher;
  private readonly normalizedTokens: Matcher;

  /**
   * @param tokens the final added tokens (later entries with the same content win)
   * @param normalize the tokenizer's normalizer, or null; normalized tokens are matched by their normalized content
   * @param encodeSpecialTokens special tokens are not split off but encoded as text (split_special_tokens)
   */
  constructor(tokens: readonly AddedToken[], private readonly normalize: ((text: string) => string) | null, encodeSpecialTokens = false) {
    this.raw = new Matcher(tokens.filter((t) => !t.normalized).map((t) => [t.content, t]), encodeSpecialTokens);
    const normalized = tokens.filter((t) => t.normalized).map((t): [string, AddedToken] => [normalize ? normalize(t.content) : t.content, t]);
    this.normalizedTokens = new Matcher(normalized, encodeSpecialTokens);
  }

  /** Token pieces and normalized text pieces of `text`, in order; empty text pieces are dropped. */
  split(text: string): Piece[] {
    const out: Piece[] = [];
    for (const piece of this.raw.empty ? [{ text, atStart: true }] : this.raw.split(text, true)) {
      if (piece.id !== undefined) {
        out.push(piece);
        continue;
      }
      if (piece.text.length === 0) continue;
      const normalized = this.normalize ? this.normalize(piece.text) : piece.text;
      const parts = this.normalizedTokens.empty ? [{ text: normalized, atStart: piece.atStart }] : this.normalizedTokens.split(normalized, piece.atStart);
      for (const part of parts) if (part.text.length > 0) out.push(part);
    }
    return out;
  }
}
