/**
 * Temporary directories for tests: tempDir(prefix) makes one under the OS temp folder (as
 * mkdtempSync) and removes it, with everything in it, when the test file's process exits
 * (node --test runs each file in a process of its own).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";

const made: string[] = [];
process.on("exit", () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory named `prefix` + 6 random characters, removed at exit. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
