/**
 * kernels.lock (as in the `kernels` Python library): a JSON file pinning each kernel repository to
 * a revision (commit sha) and the sha256 of every file of that revision, so a load fetches exactly
 * what was locked and refuses files whose bytes differ.
 *
 *   { "org/rmsnorm": { "revision": "<40 hex>", "version": 1, "files": { "build/cpu-wasm/metadata.json": "<sha256>", … } } }
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { listFiles } from "./sandbox.js";

export interface LockEntry {
  revision: string;
  version?: number;
  files: Record<string, string>;
}
export type KernelsLock = Record<string, LockEntry>;

export const LOCK_FILE = "kernels.lock";

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** Read a lock file; throws naming the file when it is missing or malformed. */
export function readLock(file: string): KernelsLock {
  if (!existsSync(file)) throw new Error(`kernels lock file not found: ${file} (write one with \`tsorch kernels lock\`)`);
  let lock: KernelsLock;
  try {
    lock = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new Error(`kernels lock file ${file} is not valid JSON: ${(e as Error).message}`);
  }
  for (const [repo, e] of Object.entries(lock)) {
    if (!/^[0-9a-f]{40}$/.test(e?.revision ?? "") || typeof e.files !== "object") {
      throw new Error(`kernels lock file ${file}: entry ${repo} needs "revision" (a 40-hex commit) and "files"`);
    }
  }
  return lock;
}

export async function writeLock(file: string, lock: KernelsLock): Promise<void> {
  await writeFile(file, JSON.stringify(lock, null, 2) + "\n");
}

/** The lock entry of snapshot folder `dir` (revision `revision`): sha256 of every file. */
export function lockEntry(dir: string, revision: string, version?: number): LockEntry {
  const files: Record<string, string> = {};
  for (const f of listFiles(dir)) files[f] = sha256(readFileSync(join(dir, f)));
  return { revision, ...(version !== undefined && { version }), files };
}

/**
 * Check folder `dir` of kernel `repo` against its lock entry: the same set of files, each with the
 * pinned sha256. Throws "kernel X: file F does not match kernels.lock (sha256 …, locked …)".
 */
export function verifyLocked(repo: string, dir: string, entry: LockEntry): void {
  const present = listFiles(dir);
  const extra = present.filter((f) => !(f in entry.files));
  if (extra.length > 0) throw new Error(`kernel ${repo}: files not in kernels.lock: ${extra.join(", ")}; refusing to load`);
  for (const [f, want] of Object.entries(entry.files)) {
    const p = join(dir, f);
    if (!existsSync(p)) throw new Error(`kernel ${repo}: file ${f} pinned by kernels.lock is missing from ${dir}; refusing to load`);
    const got = sha256(readFileSync(p));
    if (got !== want) throw new Error(`kernel ${repo}: file ${f} does not match kernels.lock (sha256 ${got}, locked ${want}); refusing to load`);
  }
}
