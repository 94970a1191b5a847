/** An in-process `tsorch serve` on a loopback port for tests: stories260K on cpu with small, explicit limits. */
import "../../src/devices/builtin.js";
import { createServer, type OpenAIServer, type ServerOptions } from "../../src/serve/server.js";
import { AutoModelForCausalLM } from "../../src/transformers/index.js";
import type { PreTrainedModel } from "../../src/transformers/modeling_utils.js";
import { AutoTokenizer, type PreTrainedTokenizer } from "../../src/transformers/index.js";

export interface TestServer extends OpenAIServer {
  url: string;
  close(): Promise<void>;
}

const DEFAULTS = {
  servedModelName: "stories260K", maxNumSeqs: 64, maxNumBatchedTokens: 256, blockSize: 16,
  kvCacheBytes: 64 << 20, maxQueue: 256, maxBodyBytes: 1 << 20,
};

/** Load a model and tokenizer folder once. */
export async function load(dir: string): Promise<{ model: PreTrainedModel; tokenizer: PreTrainedTokenizer }> {
  return { model: await AutoModelForCausalLM.fromPretrained(dir), tokenizer: await AutoTokenizer.fromPretrained(dir) };
}

/** Start a server on 127.0.0.1 (random port) over an already loaded model. */
export async function startServer(m: { model: PreTrainedModel; tokenizer: PreTrainedTokenizer }, o: Partial<ServerOptions> = {}): Promise<TestServer> {
  const server = createServer(m.model, m.tokenizer, { ...DEFAULTS, ...o });
  const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
  return { ...server, url, close: () => server.app.close() };
}

/** Parse Prometheus text: the value of the first sample whose name and labels start with `prefix`. */
export function metric(text: string, prefix: string): number {
  const line = text.split("\n").find((l) => l.startsWith(prefix));
  if (!line) throw new Error(`metric ${prefix} not found`);
  return Number(line.slice(line.lastIndexOf(" ") + 1));
}
