/** JSON files of a model folder: config.json (raw, as saved by transformers) and generation_config.json. */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { CheckpointError } from "./errors.js";

/** A parsed JSON object, fields as in the file. */
export type JsonObject = Record<string, unknown>;

/** Read and parse a JSON file. Throws CheckpointError "file not found: P" or "P is not valid JSON: …". */
export async function readJsonFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new CheckpointError(code === "ENOENT" ? `file not found: ${path}` : `cannot read ${path}: ${(e as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

/** Read a JSON file that must hold an object; throws CheckpointError otherwise. */
export async function readJsonObject(path: string): Promise<JsonObject> {
  const value = await readJsonFile(path);
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new CheckpointError(`${path}: expected a JSON object`);
  }
  return value as JsonObject;
}

/** The parsed `<dir>/config.json`, unchanged (model config classes interpret it). Throws CheckpointError. */
export function loadConfig(dir: string): Promise<JsonObject> {
  return readJsonObject(join(dir, "config.json"));
}

/** The parsed `<dir>/generation_config.json`, or {} when the folder has none. Throws CheckpointError if malformed. */
export async function loadGenerationConfig(dir: string): Promise<JsonObject> {
  const path = join(dir, "generation_config.json");
  return existsSync(path) ? readJsonObject(path) : {};
}
