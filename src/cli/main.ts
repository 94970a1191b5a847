#!/usr/bin/env node
/**
 * The `tsorch` command: `tsorch generate …`, `tsorch forward …`. Errors are printed as one line
 * (`tsorch: error: …`) with a non-zero exit; TSORCH_DEBUG=1 prints the stack too. Without
 * `--model`, generate and forward use the model the package ships (models/stories260K).
 */
import { DEFAULT_MODEL } from "./default_model.js";
import "../devices/builtin.js";
import { benchCommand, BENCH_USAGE } from "./bench_serve.js";
import { conformanceCommand, CONFORMANCE_USAGE } from "./conformance.js";
import { forwardCommand, FORWARD_USAGE, generateCommand, GENERATE_USAGE } from "./generate.js";
import { UsageError } from "./args.js";
import { serveCommand, SERVE_USAGE } from "./serve.js";
import { kernelsCommand, KERNELS_USAGE } from "./kernels.js";
import { diffuseCommand, DIFFUSE_USAGE } from "./diffuse.js";

const COMMANDS: Record<string, { run: (argv: string[]) => Promise<void>; usage: string }> = {
  generate: { run: generateCommand, usage: GENERATE_USAGE },
  forward: { run: forwardCommand, usage: FORWARD_USAGE },
  conformance: { run: conformanceCommand, usage: CONFORMANCE_USAGE },
  serve: { run: serveCommand, usage: SERVE_USAGE },
  bench: { run: benchCommand, usage: BENCH_USAGE },
  kernels: { run: kernelsCommand, usage: KERNELS_USAGE },
  diffuse: { run: diffuseCommand, usage: DIFFUSE_USAGE },
};

/** argv with `--model DEFAULT_MODEL` in front when it has no --model of its own. */
function withDefaultModel(argv: string[]): string[] {
  return argv.some((a) => a === "--model" || a.startsWith("--model=")) ? argv : ["--model", DEFAULT_MODEL, ...argv];
}

const USAGE = `usage: tsorch <command> [options]
commands:
  generate   generate text from a Hugging Face checkpoint (folder or Hub id; default: the
             shipped stories260K)
  forward    print the logits of a forward pass as JSON (same default model)
  conformance  check every op of a device against float64 references
  serve      an OpenAI-compatible server (continuous batching, paged KV cache; same default model)
  bench      bench serve: benchmark a running server
  kernels    lock / download hub kernels (kernels.lock)
  diffuse    generate an image with a diffusers pipeline (folder or Hub id) and write a PNG
Run \`tsorch <command> --help\` for its options.`;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h") {
    process.stdout.write(USAGE + "\n");
    return name ? 0 : 2;
  }
  const cmd = COMMANDS[name];
  if (!cmd) throw new UsageError(`unknown command '${name}'\n${USAGE}`);
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(cmd.usage + "\n");
    return 0;
  }
  await cmd.run(name === "generate" || name === "forward" || name === "serve" ? withDefaultModel(rest) : rest);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    const err = e as Error;
    process.stderr.write(`tsorch: error: ${err?.message ?? String(e)}\n`);
    if (process.env.TSORCH_DEBUG) process.stderr.write(`${err?.stack}\n`);
    process.exitCode = e instanceof UsageError ? 2 : 1;
  },
);
