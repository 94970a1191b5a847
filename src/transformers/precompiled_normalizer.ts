/**
 * The `Precompiled` normalizer of SentencePiece tokenizers (T5, mT5, XLM-R, …) exactly as the Rust
 * `tokenizers` crate runs it (normalizers/precompiled.rs over the spm_precompiled crate).
 *
 * tokenizer.json stores SentencePiece's normalization rules (e.g. nmt_nfkc) as
 * `precompiled_charsmap`: base64 of [u32 LE trie size in bytes][darts-clone double-array trie of
 * u32 units][NUL-terminated replacement strings]. The trie maps UTF-8 byte strings to offsets of
 * their replacements. The text is normalized one extended grapheme cluster at a time: a cluster
 * shorter than 6 UTF-8 bytes whose bytes start with a key is replaced as a whole by the shortest
 * such key's replacement (even when the key covers only part of the cluster, as the Rust code
 * does); otherwise each character is replaced when it is a key, else kept.
 *
 * tokenizers.js approximates this with NFKC and fixed character classes, which differs for
 * zero-width joiners, emoji sequences, halfwidth kana with sound marks, stacked combining marks and
 * long clusters; this class reads the charsmap instead.
 */

const UTF8 = new TextEncoder();
const UTF8_DECODE = new TextDecoder("utf-8", { fatal: true });

/** The charsmap: a darts-clone double array and the replacement strings it points into. */
export class PrecompiledCharsmap {
  private readonly units: Uint32Array;
  private readonly normalized: Uint8Array;
  private readonly replacements = new Map<number, string>();

  /** `charsmap`: the decoded precompiled_charsmap bytes. Throws on a truncated blob. */
  constructor(charsmap: Uint8Array) {
    const view = new DataView(charsmap.buffer, charsmap.byteOffset, charsmap.byteLength);
    if (charsmap.byteLength < 4) throw new Error("Precompiled normalizer: precompiled_charsmap is shorter than its 4-byte header");
    const trieBytes = view.getUint32(0, true);
    if (4 + trieBytes > charsmap.byteLength || trieBytes % 4 !== 0) {
      throw new Error(`Precompiled normalizer: precompiled_charsmap announces a ${trieBytes}-byte trie but holds ${charsmap.byteLength - 4} bytes`);
    }
    this.units = new Uint32Array(trieBytes / 4);
    for (let i = 0; i < this.units.length; i++) this.units[i] = view.getUint32(4 + 4 * i, true);
    this.normalized = charsmap.subarray(4 + trieBytes);
  }

  /** From tokenizer.json's base64 `precompiled_charsmap`. */
  static fromBase64(b64: string): PrecompiledCharsmap {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new PrecompiledCharsmap(bytes);
  }

  /**
   * spm_precompiled's transform: the replacement of the shortest key that `bytes` start with
   * (DoubleArray::common_prefix_search, first result), or undefined when no key matches.
   */
  transform(bytes: Uint8Array): string | undefined {
    const u = this.units;
    const offset = (unit: number) => (unit >>> 10) << ((unit & (1 << 9)) >>> 6);
    let node = offset(u[0]);
    for (const c of bytes) {
      if (c === 0) break;
      node ^= c;
      const unit = u[node];
      // label: the low byte plus the has-value flag (bit 31) must equal c.
      if ((unit & 0x800000ff) >>> 0 !== c) return undefined;
      node ^= offset(unit);
      if ((unit >>> 8) & 1) return this.replacement(u[node] & 0x7fffffff);
    }
    return undefined;
  }

  /** The NUL-terminated replacement string at byte `index` of the normalized blob. */
  private replacement(index: number): string {
    let s = this.replacements.get(index);
    if (s === undefined) {
      let end = index;
      while (end < this.normalized.length && this.normalized[end] !== 0) end++;
      s = UTF8_DECODE.decode(this.normalized.subarray(index, end));
      this.replacements.set(index, s);
    }
    return s;
  }

  /** Normalize `text` as tokenizers' Precompiled::normalize (see the file comment). */
  normalize(text: string): string {
    let out = "";
    for (const { segment } of GRAPHEMES.segment(text)) {
      const bytes = UTF8.encode(segment);
      if (bytes.length < 6) {
        const whole = this.transform(bytes);
        if (whole !== undefined) {
          out += whole;
          continue;
        }
      }
      for (const ch of segment) out += this.transform(UTF8.encode(ch)) ?? ch;
    }
    return out;
  }
}

const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: "grapheme" });
