/**
 * Flag parsing for the CLI (node:util parseArgs), accepting `--flag false` for boolean flags and
 * `--flag -1` (a negative number) for value flags; an unknown flag names the closest known one.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { closestName } from "../transformers/generation/configuration_utils.js";

export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig["options"]>;

/** Parse argv with `options`; boolean flags may be followed by "true" or "false". Throws UsageError. */
export function parseFlags(argv: string[], options: Options): Record<string, string | boolean | undefined> {
  const args: string[] = [];
  const off: string[] = []; // boolean flags given as `--flag false`: explicitly false, not absent
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].startsWith("--") ? argv[i].slice(2) : "";
    if (options[name]?.type === "boolean" && (argv[i + 1] === "true" || argv[i + 1] === "false")) {
      if (argv[++i] === "true") args.push(argv[i - 1]);
      else off.push(name);
      continue;
    }
    if (options[name]?.type === "string" && /^-(\d|\.\d|inf)/i.test(argv[i + 1] ?? "")) {
      args.push(`${argv[i]}=${argv[++i]}`); // a negative number is a value, not a flag
      continue;
    }
    args.push(argv[i]);
  }
  try {
    const values = parseArgs({ args, options, allowPositionals: false, strict: true }).values as Record<string, string | boolean | undefined>;
    for (const name of off) values[name] ??= false;
    return values;
  } catch (e) {
    const err = e as Error & { code?: string };
    const unknown = err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? /'(-[^']*)'/.exec(err.message)?.[1] : undefined;
    if (unknown) {
      const near = closestName(unknown.replace(/^-+/, ""), Object.keys(options));
      throw new UsageError(`unknown option '${unknown}'${near ? `; did you mean '--${near}'?` : ""}`);
    }
    throw new UsageError(err.message.replace(/\s*\n\s*/g, " "));
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
