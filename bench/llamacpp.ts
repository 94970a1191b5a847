/**
 * The llama.cpp peer of `npm run bench`: node-llama-cpp (installed outside the project, e.g.
 * `cd /tmp/llamacpp-peer && npm install -E node-llama-cpp@3.21.1`) timing GGUF files of the same
 * weights (bench/hf_to_gguf_qwen3.py) with bench/llamacpp_generate.mjs in a child process, one
 * type at a time, while this process waits (ggml's threads spin: nothing else may run then).
 * Nothing is downloaded: a missing package or GGUF is reported and skipped.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

/** Result of llamacpp_generate.mjs (prefill_tok_s, decode_tok_s, ...) or why it was skipped. */
export type LlamaCppResult = Record<string, unknown> & { skipped?: string };

/**
 * Time every GGUF in `ggufDir` whose name ends in -<type>.gguf for `types` (e.g. bf16, q8_0,
 * q4_0) with `threads` threads; `peerDir` holds node_modules/node-llama-cpp.
 */
export function llamaCppPeer(peerDir: string, ggufDir: string, types: string[], threads: number, newTokens: number): Record<string, LlamaCppResult> {
  const out: Record<string, LlamaCppResult> = {};
  if (!existsSync(path.join(peerDir, "node_modules", "node-llama-cpp"))) {
    for (const t of types) out[t] = { skipped: `node-llama-cpp is not installed in ${peerDir} (see bench/llamacpp.ts)` };
    return out;
  }
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../bench/llamacpp_generate.mjs");
  const files = existsSync(ggufDir) ? readdirSync(ggufDir) : [];
  for (const t of types) {
    const f = files.find((name) => name.endsWith(`-${t}.gguf`));
    if (!f) {
      out[t] = { skipped: `no *-${t}.gguf in ${ggufDir} (convert with bench/hf_to_gguf_qwen3.py)` };
      continue;
    }
    const args = [script, path.join(ggufDir, f), "--threads", String(threads), "--new", String(newTokens), "--runs", "3", "--peer-dir", peerDir];
    const stdout = execFileSync(process.execPath, args, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
    out[t] = JSON.parse(stdout.trim().split("\n").at(-1)!);
  }
  return out;
}
