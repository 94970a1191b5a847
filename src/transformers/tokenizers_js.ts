/**
 * The parts of @huggingface/tokenizers (tokenizers.js) that tsorch uses, typed, and the places where its
 * output differs from the Rust `tokenizers` crate that transformers uses: the ByteFallback decoder and the
 * Precompiled normalizer (replaced by Rust-exact versions here).
 *
 * Only members that the package's own .d.ts files declare public are used: the Tokenizer's normalizer,
 * pre_tokenizer, model and decoder fields, token_to_id / id_to_token / decode, and the exported decoder classes.
 * tsorch splits added tokens and post-processes itself (added_vocabulary.ts, post_processor.ts). The package is
 * pinned to an exact version in package.json because fidelity to the Rust crate rests on these components
 * behaving as they do in that version (test/tokenizer_fidelity.test.ts checks them against transformers).
 */
import * as tokenizersJs from "@huggingface/tokenizers";
import { PrecompiledCharsmap } from "./precompiled_normalizer.js";

// The package's typings use extension-less relative imports, which NodeNext cannot resolve, so all its
// exports type as `any`. These are the parts used here, as the package's own .d.ts files declare them.
export interface JsDecoder {
  config: unknown;
  added_tokens: unknown[];
  end_of_word_suffix: string | null;
  decode_chain(tokens: string[]): string[];
}
export interface JsTokenizer {
  normalizer: { normalize(text: string): string } | null;
  pre_tokenizer: { pre_tokenize(text: string): string[] } | null;
  model: ((tokens: string[]) => string[]) & { tokens_to_ids: Map<string, number>; unk_token_id?: number };
  decoder: JsDecoder | null;
  decode(ids: number[], opts: { skip_special_tokens: boolean; clean_up_tokenization_spaces: boolean }): string;
  token_to_id(token: string): number | undefined;
  id_to_token(id: number): string | undefined;
}
type JsNormalizer = NonNullable<JsTokenizer["normalizer"]>;
const { Tokenizer, ByteFallbackDecoder, SequenceDecoder, PrecompiledNormalizer, SequenceNormalizer } = tokenizersJs as unknown as {
  Tokenizer: new (tokenizerJson: object, config: object) => JsTokenizer;
  ByteFallbackDecoder: new (config: unknown) => JsDecoder & { text_decoder: TextDecoder };
  SequenceDecoder: new (config: unknown) => JsDecoder & { decoders: JsDecoder[] };
  PrecompiledNormalizer: new (config: unknown) => JsNormalizer & { config: { precompiled_charsmap?: string | null } };
  SequenceNormalizer: new (config: unknown) => JsNormalizer & { normalizers: (JsNormalizer | null)[] };
};

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const BYTE_TOKEN = /^<0x[0-9A-Fa-f]{2}>$/;

/**
 * The Rust ByteFallback decoder turns a run of `<0xXX>` tokens that is not valid UTF-8 into one U+FFFD
 * per byte; tokenizers.js' TextDecoder gives one per invalid subsequence and keeps the valid characters.
 */
class RustByteFallbackDecoder extends ByteFallbackDecoder {
  override decode_chain(tokens: string[]): string[] {
    const out: string[] = [];
    let bytes: number[] = [];
    const flush = () => {
      if (bytes.length === 0) return;
      try {
        out.push(STRICT_UTF8.decode(Uint8Array.from(bytes)));
      } catch {
        for (let i = 0; i < bytes.length; i++) out.push("\uFFFD");
      }
      bytes = [];
    };
    for (const token of tokens) {
      if (BYTE_TOKEN.test(token)) {
        bytes.push(parseInt(token.slice(3, 5), 16));
      } else {
        flush();
        out.push(token);
      }
    }
    flush();
    return out;
  }
}

/** Swaps tokenizers.js' ByteFallback decoders (alone or inside a Sequence) for the Rust-exact one. */
function useRustByteFallback(tokenizer: JsTokenizer): void {
  const swap = (d: JsDecoder): JsDecoder => {
    if (d instanceof ByteFallbackDecoder) return new RustByteFallbackDecoder(d.config);
    if (d instanceof SequenceDecoder) d.decoders = d.decoders.map(swap);
    return d;
  };
  const top = tokenizer.decoder;
  if (top === null) return;
  const swapped = swap(top);
  swapped.added_tokens = top.added_tokens;
  swapped.end_of_word_suffix = top.end_of_word_suffix;
  tokenizer.decoder = swapped;
}

/**
 * tokenizers.js' Precompiled normalizer ignores precompiled_charsmap and applies NFKC plus fixed
 * character classes; this one runs the charsmap as the Rust crate does (precompiled_normalizer.ts).
 * A Precompiled normalizer without a charsmap normalizes nothing, as in Rust.
 */
class RustPrecompiledNormalizer extends PrecompiledNormalizer {
  private readonly charsmap: PrecompiledCharsmap | null;
  constructor(config: { precompiled_charsmap?: string | null }) {
    super(config);
    this.charsmap = config.precompiled_charsmap ? PrecompiledCharsmap.fromBase64(config.precompiled_charsmap) : null;
  }
  override normalize(text: string): string {
    return this.charsmap ? this.charsmap.normalize(text) : text;
  }
}

/** Swaps tokenizers.js' Precompiled normalizers (alone or inside a Sequence) for the Rust-exact one. */
function useRustPrecompiled(tokenizer: JsTokenizer): void {
  const swap = (n: JsNormalizer | null): JsNormalizer | null => {
    if (n instanceof PrecompiledNormalizer) return new RustPrecompiledNormalizer(n.config);
    if (n instanceof SequenceNormalizer) n.normalizers = n.normalizers.map(swap);
    return n;
  };
  tokenizer.normalizer = swap(tokenizer.normalizer);
}

/**
 * A tokenizers.js Tokenizer of a (rewritten) tokenizer.json with Rust-exact byte-fallback decoding
 * and Precompiled normalization.
 * Throws if the file uses a component tokenizers.js does not implement.
 * @param specialTokens contents of bos/eos/unk/pad (a Unigram model reads eos_token)
 */
export function jsTokenizer(json: object, specialTokens: Record<string, string | undefined>): JsTokenizer {
  const tokenizer = new Tokenizer(json, { ...specialTokens, clean_up_tokenization_spaces: false });
  useRustByteFallback(tokenizer);
  useRustPrecompiled(tokenizer);
  return tokenizer;
}

/** tokenizers.js' pre-tokenizer of a tokenizer.json `pre_tokenizer` value (built through a Tokenizer of an empty model). */
export function jsPreTokenizer(config: object): NonNullable<JsTokenizer["pre_tokenizer"]> {
  const empty = { model: { type: "BPE", vocab: {}, merges: [] }, normalizer: null, pre_tokenizer: config, post_processor: null, decoder: null, added_tokens: [] };
  return new Tokenizer(empty, {}).pre_tokenizer!;
}

/** The global Unicode RegExp tokenizers.js compiles for a Split pre-tokenizer's pattern ({String} or {Regex}, Oniguruma syntax). */
export function jsSplitPattern(config: object): RegExp {
  const pattern = (jsPreTokenizer(config) as { pattern?: RegExp | null }).pattern;
  if (!(pattern instanceof RegExp)) throw new Error(`Split pre-tokenizer pattern ${JSON.stringify((config as { pattern?: unknown }).pattern)} is neither {"String": …} nor {"Regex": …}`);
  return pattern;
}
