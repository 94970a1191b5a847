/**
 * Debug lines for people tracing what tsorch did (e.g. which checkpoint tensors were skipped):
 * written to stderr when the environment variable TSORCH_DEBUG is set, as the CLI's stack traces
 * are. Browsers have no such variable, so they print none.
 */
const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;

/** Print `message` on stderr, prefixed with "tsorch: ", when TSORCH_DEBUG is set. */
export function debug(message: string): void {
  if (env?.TSORCH_DEBUG) console.error(`tsorch: ${message}`);
}
