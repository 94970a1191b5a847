#!/usr/bin/env node
/**
 * The `tsorch` command: `tsorch generate …`, `tsorch forward …`. Errors are printed as one line
 * (`tsorch: error: …`) with a non-zero exit; TSORCH_DEBUG=1 prints the stack too.
 */
import "../devices/builtin.js";
import { conformanceCommand, CONFORMANCE_USAGE } from "./conformance.js";
import { forwardCommand, FORWARD_USAGE, generateCommand, GENERATE_USAGE } from "./generate.js";
import { UsageError } from "./args.js";
import { kernelsCommand, KERNELS_USAGE } from "./kernels.js";

const COMMANDS: Record<string, { run: (argv: string[]) => Promise<void>; usage: string }> = {
  generate: { run: generateCommand, usage: GENERATE_USAGE },
  forward: { run: forwardCommand, usage: FORWARD_USAGE },
  conformance: { run: conformanceCommand, usage: CONFORMANCE_USAGE },
  kernels: { run: kernelsCommand, usage: KERNELS_USAGE },
};

const USAGE = `usage: tsorch <command> [options]
commands:
  generate   generate text from a Hugging Face checkpoint (folder or Hub id)
  forward    print the logits of a forward pass as JSON
  conformance  check every op of a device against float64 references
  kernels    lock / download hub kernels (kernels.lock)
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
  await cmd.run(rest);
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
