/**
 * The Hugging Face cache layout, shared with Python's huggingface_hub and transformers:
 *   <cache>/models--org--name/refs/<revision>           a file holding the commit hash
 *   <cache>/models--org--name/blobs/<etag>              file contents (etag: sha256 for LFS files,
 *                                                       the git blob sha1 otherwise)
 *   <cache>/models--org--name/snapshots/<commit>/<file> relative symlink to ../../blobs/<etag>
 */
import { existsSync, readFileSync } from "node:fs";
import { copyFile, mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { getHFHubCachePath, getRepoFolderName } from "@huggingface/hub";

const COMMIT_HASH = /^[0-9a-f]{40}$/;

/**
 * The cache root, by the same rule as huggingface_hub: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE,
 * else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
 */
export function hubCacheDir(): string {
  return getHFHubCachePath();
}

/** The cache folder of model repo `repoId` ("org/name"): <cacheDir>/models--org--name. */
export function repoCacheFolder(cacheDir: string, repoId: string): string {
  return join(cacheDir, getRepoFolderName({ type: "model", name: repoId }));
}

/** The commit `revision` stands for in the cache: itself if it is a commit hash, else refs/<revision>; undefined if unknown. */
export function cachedCommit(repoFolder: string, revision: string): string | undefined {
  if (COMMIT_HASH.test(revision)) return revision;
  const ref = join(repoFolder, "refs", revision);
  return existsSync(ref) ? readFileSync(ref, "utf8").trim() : undefined;
}

/** The snapshot folder of `commit`: <repoFolder>/snapshots/<commit>. */
export function snapshotFolder(repoFolder: string, commit: string): string {
  return join(repoFolder, "snapshots", commit);
}

/** Record that `revision` (a branch or tag) points at `commit`; no-op when revision is the commit. */
export async function writeRef(repoFolder: string, revision: string, commit: string): Promise<void> {
  if (revision === commit) return;
  const ref = join(repoFolder, "refs", revision);
  await mkdir(dirname(ref), { recursive: true });
  await writeFile(ref, commit);
}

/** Path of the blob named `etag`. */
export function blobPath(repoFolder: string, etag: string): string {
  return join(repoFolder, "blobs", etag);
}

/** Make snapshots/<commit>/<file> a relative symlink to blobs/<etag> (a copy where symlinks are not allowed). */
export async function linkBlob(repoFolder: string, commit: string, file: string, etag: string): Promise<void> {
  const pointer = join(snapshotFolder(repoFolder, commit), file);
  const blob = blobPath(repoFolder, etag);
  await mkdir(dirname(pointer), { recursive: true });
  await rm(pointer, { force: true });
  try {
    await symlink(relative(dirname(pointer), blob), pointer);
  } catch {
    await copyFile(blob, pointer);
  }
}
