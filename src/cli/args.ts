/** Flag parsing for the CLI (node:util parseArgs), accepting `--flag false` for boolean flags. */
import { parseArgs, type ParseArgsConfig } from "node:util";

export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig["options"]>;

/** Parse argv with `options`; boolean flags may be followed by "true" or "false". */
export function parseFlags(argv: string[], options: Options): Record<string, string | boolean | undefined> {
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].startsWith("--") ? argv[i].slice(2) : "";
    if (options[name]?.type === "boolean" && (argv[i + 1] === "true" || argv[i + 1] === "false")) {
      if (argv[++i] === "true") args.push(argv[i - 1]);
      continue;
    }
    args.push(argv[i]);
  }
  try {
    return parseArgs({ args, options, allowPositionals: false, strict: true }).values as Record<string, string | boolean | undefined>;
  } catch (e) {
    throw new UsageError((e as Error).message.replace(/\s*\n\s*/g, " "));
  }
}

/** A numeric flag value, or undefined when absent; throws a UsageError naming the flag. */
export function numberFlag(values: Record<string, unknown>, name: string, integer = false): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v === "" || !Number.isFinite(n) || (integer && !Number.isInteger(n))) throw new UsageError(`--${name} expects ${integer ? "an integer" : "a number"}, got '${v}'`);
  return n;
}

/** "1,2,3" -> [[1,2,3]]; "1,2;3,4" -> two sequences. */
export function parseIdLists(text: string): number[][] {
  const fields = text.split(";").map((row) => row.split(",").map((s) => s.trim()));
  const rows = fields.map((row) => row.map(Number));
  if (fields.some((r) => r.some((s) => !/^\d+$/.test(s)))) {
    throw new UsageError(`--input-ids expects comma-separated non-negative integers (';' between sequences), got '${text}'`);
  }
  return rows;
}
