/**
 * Locating ../shared (fixture checkpoints and reference outputs) from the compiled tests. Every
 * test that reads ../shared goes through here and checks its fixture with {@link missing}, so
 * that under CI a missing fixture fails instead of skipping (test/shared_fixtures.test.ts checks it).
 */
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

/** The project root (tests run from dist/test/…). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
/** ../shared beside the project, or the folder TSORCH_SHARED names. */
export const SHARED = path.resolve(ROOT, process.env.TSORCH_SHARED ?? "../shared");
export const STORIES = path.join(SHARED, "models/stories260K");
export const TINY = path.join(SHARED, "fixtures/tiny");
export const CLI = path.join(ROOT, "dist/src/cli/main.js");

/**
 * Why a test that needs `fixture` (a file or folder under ../shared) must skip, or undefined when it
 * is there. In CI (CI=true) the fixtures must be present, so a missing one throws instead.
 */
export function missing(fixture: string): string | undefined {
  if (existsSync(fixture)) return undefined;
  const why = `../shared is absent: ${fixture} not found (fixtures live in ../shared beside the project, or TSORCH_SHARED)`;
  if (process.env.CI === "true") throw new Error(`${why}; CI must run with ../shared`);
  return why;
}

export function readJson<T = any>(file: string): T {
  return JSON.parse(readFileSync(file, "utf8")) as T;
}

/** Largest |a[i] - b[i]| over two equally long sequences. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length mismatch: ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
