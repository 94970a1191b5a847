/**
 * The OpenAI API surface: JSON schemas of the request bodies (validated by Fastify before a route
 * runs), the OpenAI error body, and the translation of a request's sampling fields into the
 * engine's SamplingParams. Field names and ranges follow OpenAI's API reference and vLLM's
 * extensions (top_k, min_p, repetition_penalty, ignore_eos).
 */

/** An error the server answers with: HTTP status and OpenAI's error body. */
export class ApiError extends Error {
  constructor(readonly status: number, message: string, readonly type: string, readonly param: string | null = null, readonly headers: Record<string, string> = {}) {
    super(message);
  }

  /** OpenAI's error shape: {"error": {"message", "type", "param", "code"}}. */
  body(): { error: { message: string; type: string; param: string | null; code: number } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.status } };
  }
}

export const badRequest = (message: string, param: string | null = null) => new ApiError(400, message, "invalid_request_error", param);

/** One error of Ajv (as Fastify passes it in `validation`). */
export interface SchemaError { keyword: string; instancePath: string; message?: string; params: Record<string, unknown> }

/**
 * A validation failure as one readable line and the field it names: Ajv reports each branch of an
 * `anyOf` separately ("must be number, must be null, must match a schema in anyOf"); here the
 * branches of a field merge into one clause ("temperature must be number or null"), and a bound a
 * value broke wins over the type alternatives ("max_tokens must be >= 1").
 */
export function describeSchemaErrors(errors: SchemaError[]): { message: string; param: string | null } {
  const byField = new Map<string, SchemaError[]>();
  for (const e of errors) {
    if (e.keyword === "anyOf" || e.keyword === "oneOf") continue;
    const field = e.keyword === "required" ? [e.instancePath.slice(1), e.params.missingProperty].filter(Boolean).join("/") : e.instancePath.slice(1);
    byField.set(field, [...(byField.get(field) ?? []), e]);
  }
  const clauses = [...byField].map(([field, es]) => {
    const name = field.replace(/\//g, ".") || "body";
    const bounds = es.filter((e) => e.keyword !== "type");
    if (bounds.length) return `${name} ${[...new Set(bounds.map((e) => e.keyword === "required" ? "is required" : e.message))].join(", ")}`;
    const types = [...new Set(es.map((e) => String(e.params.type)))];
    return `${name} must be ${types.length > 1 ? `${types.slice(0, -1).join(", ")} or ${types.at(-1)}` : types[0]}`;
  });
  const first = [...byField.keys()][0];
  return { message: clauses.join("; "), param: first ? first.split("/")[0] : null };
}

const nullable = (schema: object) => ({ anyOf: [schema, { type: "null" }] });
const tokenIds = { type: "array", items: { type: "integer", minimum: 0 }, minItems: 1 };

/** Sampling fields shared by completions and chat completions. */
const sampling = {
  model: { type: "string" },
  max_tokens: nullable({ type: "integer", minimum: 1 }),
  temperature: nullable({ type: "number", minimum: 0, maximum: 2 }),
  top_p: nullable({ type: "number", exclusiveMinimum: 0, maximum: 1 }),
  top_k: nullable({ type: "integer", minimum: -1 }),
  min_p: nullable({ type: "number", minimum: 0, maximum: 1 }),
  seed: nullable({ type: "integer" }),
  stop: nullable({ anyOf: [{ type: "string", minLength: 1 }, { type: "array", items: { type: "string", minLength: 1 }, maxItems: 16 }] }),
  presence_penalty: nullable({ type: "number", minimum: -2, maximum: 2 }),
  frequency_penalty: nullable({ type: "number", minimum: -2, maximum: 2 }),
  repetition_penalty: nullable({ type: "number", exclusiveMinimum: 0, maximum: 10 }),
  n: nullable({ type: "integer", minimum: 1, maximum: 16 }),
  stream: nullable({ type: "boolean" }),
  stream_options: nullable({ type: "object", properties: { include_usage: { type: "boolean" } } }),
  ignore_eos: { type: "boolean" },
  return_tokens_as_token_ids: { type: "boolean" },
} as const;

export const completionSchema = {
  type: "object",
  required: ["model", "prompt"],
  properties: {
    ...sampling,
    prompt: {
      anyOf: [
        { type: "string" },
        { type: "array", items: { type: "string" }, minItems: 1, maxItems: 64 },
        tokenIds,
        { type: "array", items: tokenIds, minItems: 1, maxItems: 64 },
      ],
    },
    logprobs: nullable({ type: "integer", minimum: 0, maximum: 20 }),
    echo: nullable({ type: "boolean" }),
  },
} as const;

const contentPart = { type: "object", required: ["type"], properties: { type: { type: "string" }, text: { type: "string" } } };

export const chatSchema = {
  type: "object",
  required: ["model", "messages"],
  properties: {
    ...sampling,
    max_completion_tokens: nullable({ type: "integer", minimum: 1 }),
    messages: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        required: ["role"],
        properties: { role: { type: "string" }, content: nullable({ anyOf: [{ type: "string" }, { type: "array", items: contentPart }] }) },
      },
    },
    logprobs: nullable({ type: "boolean" }),
    top_logprobs: nullable({ type: "integer", minimum: 0, maximum: 20 }),
    add_generation_prompt: { type: "boolean" },
  },
} as const;

export const tokenizeSchema = {
  type: "object",
  properties: {
    model: { type: "string" },
    prompt: { type: "string" },
    messages: chatSchema.properties.messages,
    add_special_tokens: { type: "boolean" },
  },
} as const;

export const detokenizeSchema = {
  type: "object",
  required: ["tokens"],
  properties: { model: { type: "string" }, tokens: { type: "array", items: { type: "integer", minimum: 0 } } },
} as const;

/** The sampling fields of a request body (validated by the schemas above). */
export interface SamplingFields {
  model: string;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  min_p?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  repetition_penalty?: number | null;
  n?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  ignore_eos?: boolean;
  /** vLLM's extension: logprob tokens as "token_id:ID" instead of their text. */
  return_tokens_as_token_ids?: boolean;
}

export interface CompletionRequest extends SamplingFields {
  prompt: string | string[] | number[] | number[][];
  logprobs?: number | null;
  echo?: boolean | null;
}

export interface ChatMessageIn {
  role: string;
  content?: string | { type: string; text?: string }[] | null;
}

export interface ChatRequest extends SamplingFields {
  messages: ChatMessageIn[];
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  add_generation_prompt?: boolean;
}
