/**
 * tokenizer.json's pre_tokenizer, run on one piece of text between added tokens. Metaspace is implemented here
 * as the Rust `tokenizers` crate has it (pre_tokenizers/metaspace.rs), because tokenizers.js ignores its `split`
 * option (default true: the text is cut before every ▁) and its older `add_prefix_space` spelling, and cannot
 * tell where a piece of a Sequence starts; every other pre-tokenizer is tokenizers.js'.
 */
import type { JsonObject } from "../hub/index.js";
import { jsPreTokenizer } from "./tokenizers_js.js";

/** Pre-tokens of a piece; atStart: the piece begins the original text (Metaspace's prepend_scheme "first"). */
export type PreTokenize = (text: string, atStart: boolean) => string[];

/**
 * Metaspace: spaces become the replacement character, which is prepended per prepend_scheme ("always"; "first":
 * only for text at the start of the input; "never"), then with split the text is cut before each replacement.
 */
function metaspace(config: JsonObject): PreTokenize {
  const replacement = typeof config.replacement === "string" ? config.replacement : "\u2581";
  const scheme = config.prepend_scheme ?? (config.add_prefix_space === false ? "never" : "always");
  const split = config.split !== false;
  return (text, atStart) => {
    let out = text.replaceAll(" ", replacement);
    if (!out.startsWith(replacement) && (scheme === "always" || (scheme === "first" && atStart))) out = replacement + out;
    if (!split) return [out];
    const pieces: string[] = [];
    let start = 0;
    for (let at = out.indexOf(replacement, 1); at > 0; at = out.indexOf(replacement, at + replacement.length)) {
      pieces.push(out.slice(start, at));
      start = at;
    }
    pieces.push(out.slice(start));
    return pieces;
  };
}

/** The pre-tokenizer of a tokenizer.json `pre_tokenizer` value (null: the piece as it is). */
export function preTokenizer(config: JsonObject | null | undefined): PreTokenize {
  if (config === null || config === undefined) return (text) => [text];
  if (config.type === "Metaspace") return metaspace(config);
  if (config.type === "Sequence") {
    const steps = ((config.pretokenizers ?? []) as JsonObject[]).map(preTokenizer);
    return (text, atStart) => {
      let pieces = [{ text, atStart }];
      for (const step of steps) {
        pieces = pieces.flatMap((p) => step(p.text, p.atStart).map((t, i) => ({ text: t, atStart: p.atStart && i === 0 })));
      }
      return pieces.map((p) => p.text);
    };
  }
  const js = jsPreTokenizer(config);
  return (text) => js.pre_tokenize(text);
}
