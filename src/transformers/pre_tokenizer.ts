/**
 * tokenizer.json's pre_tokenizer, run on one piece of text between added tokens. Metaspace and Split are
 * implemented here as the Rust `tokenizers` crate has them (pre_tokenizers/metaspace.rs, split.rs,
 * tokenizer/normalizer.rs's split behaviours), because tokenizers.js ignores Metaspace's `split` option (default
 * true: the text is cut before every ▁) and its older `add_prefix_space` spelling, cannot tell where a piece of a
 * Sequence starts, and knows only the Isolated and Removed behaviours of Split (whose regex it compiles, Oniguruma
 * syntax rewritten to JS, and is used here). Every other pre-tokenizer is tokenizers.js'.
 */
import type { JsonObject } from "../hub/index.js";
import { jsPreTokenizer, jsSplitPattern } from "./tokenizers_js.js";

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

type Span = { start: number; end: number; isMatch: boolean };

/** Pieces of `text` by the split behaviour (Rust's SplitDelimiterBehavior) applied to gaps and matches that tile it. */
function bySplitBehavior(text: string, spans: Span[], behavior: string): string[] {
  const merged: Span[] = [];
  let previousMatch = false;
  const pushOrExtend = (span: Span, extend: boolean) => {
    const last = merged[merged.length - 1];
    if (extend && last !== undefined) last.end = span.end;
    else merged.push({ ...span });
  };
  switch (behavior) {
    case "Removed":
      return spans.filter((s) => !s.isMatch).map((s) => text.slice(s.start, s.end));
    case "Isolated":
      return spans.map((s) => text.slice(s.start, s.end));
    case "MergedWithPrevious":
      for (const span of spans) {
        pushOrExtend(span, span.isMatch && !previousMatch);
        previousMatch = span.isMatch;
      }
      break;
    case "MergedWithNext": {
      for (const span of [...spans].reverse()) {
        const last = merged[merged.length - 1];
        if (span.isMatch && !previousMatch && last !== undefined) last.start = span.start;
        else merged.push({ ...span });
        previousMatch = span.isMatch;
      }
      merged.reverse();
      break;
    }
    case "Contiguous":
      for (const span of spans) {
        pushOrExtend(span, span.isMatch === previousMatch);
        previousMatch = span.isMatch;
      }
      break;
  }
  return merged.map((s) => text.slice(s.start, s.end));
}

const SPLIT_BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"];

/** Split: the pattern's matches and the gaps between them (flipped by invert), grouped by the behavior. */
function split(config: JsonObject): PreTokenize {
  const pattern = jsSplitPattern({ ...config, invert: false });
  const invert = config.invert === true;
  const behavior = String(config.behavior ?? "Isolated");
  if (!SPLIT_BEHAVIORS.includes(behavior)) {
    throw new Error(`pre_tokenizer Split behavior ${JSON.stringify(behavior)} is not one of ${SPLIT_BEHAVIORS.join(", ")}`);
  }
  return (text) => {
    const spans: Span[] = [];
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      if (match[0].length === 0) continue;
      if (last < match.index) spans.push({ start: last, end: match.index, isMatch: invert });
      spans.push({ start: match.index, end: match.index + match[0].length, isMatch: !invert });
      last = match.index + match[0].length;
    }
    if (last < text.length) spans.push({ start: last, end: text.length, isMatch: invert });
    return bySplitBehavior(text, spans, behavior).filter((piece) => piece.length > 0);
  };
}

/**
 * The pre-tokenizer of a tokenizer.json `pre_tokenizer` value (null: the piece as it is).
 * Throws for a Split with an unknown behavior or pattern, or a type tokenizers.js does not implement.
 */
export function preTokenizer(config: JsonObject | null | undefined): PreTokenize {
  if (config === null || config === undefined) return (text) => [text];
  if (config.type === "Metaspace") return metaspace(config);
  if (config.type === "Split") return split(config);
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
