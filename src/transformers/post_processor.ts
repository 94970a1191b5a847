/**
 * tokenizer.json's post_processor on token ids of one sequence, as the Rust `tokenizers` crate applies it
 * (processors/template.rs, bert.rs, roberta.rs, byte_level.rs, sequence.rs): the special tokens it adds
 * carry the ids the file gives them.
 */
import type { JsonObject } from "../hub/index.js";

/** Adds a sequence's special tokens to its ids (when addSpecialTokens). */
export type PostProcessor = (ids: number[], addSpecialTokens: boolean) => number[];

interface TemplatePiece {
  SpecialToken?: { id: string };
  Sequence?: { id: string };
}

/**
 * The post-processor of a tokenizer.json `post_processor` value (null: none). Throws naming the type for a
 * post-processor this file does not know, and naming the token for a template token without ids.
 */
export function postProcessor(config: JsonObject | null | undefined): PostProcessor {
  if (config === null || config === undefined) return (ids) => ids;
  switch (config.type) {
    case "TemplateProcessing": {
      const specials = (config.special_tokens ?? {}) as Record<string, { ids?: number[] }>;
      const single = (config.single ?? []) as TemplatePiece[];
      const before: number[] = [];
      const after: number[] = [];
      let seenSequence = false;
      for (const piece of single) {
        if (piece.Sequence !== undefined) {
          seenSequence = true;
          continue;
        }
        const name = piece.SpecialToken?.id ?? "";
        const ids = specials[name]?.ids;
        if (!Array.isArray(ids)) throw new Error(`post_processor template token ${JSON.stringify(name)} has no entry in special_tokens`);
        (seenSequence ? after : before).push(...ids);
      }
      return (ids, add) => (add ? [...before, ...ids, ...after] : ids);
    }
    case "BertProcessing":
    case "RobertaProcessing": {
      const cls = (config.cls as [string, number])[1];
      const sep = (config.sep as [string, number])[1];
      return (ids, add) => (add ? [cls, ...ids, sep] : ids);
    }
    case "ByteLevel":
      return (ids) => ids;
    case "Sequence": {
      const steps = ((config.processors ?? []) as JsonObject[]).map((p) => postProcessor(p));
      return (ids, add) => steps.reduce((acc, step) => step(acc, add), ids);
    }
    default:
      throw new Error(`post_processor type ${JSON.stringify(config.type)} is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)`);
  }
}
