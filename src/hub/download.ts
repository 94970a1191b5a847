/**
 * Download the files a model needs from the Hugging Face Hub into the shared cache layout (cache.ts).
 * Talks to the Hub through @huggingface/hub (modelInfo, listFiles, downloadFile: auth, redirects,
 * Xet storage) but writes blobs and snapshot links itself: the library's downloadFileToCacheDir
 * prints "Downloading …" to stdout with console.debug and offers no progress callback.
 */
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, rename } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream } from "node:stream/web";
import { downloadFile, listFiles, modelInfo, type ListFileEntry } from "@huggingface/hub";
import cliProgress from "cli-progress";
import { blobPath, linkBlob, repoCacheFolder, snapshotFolder, writeRef } from "./cache.js";
import { HubError } from "./errors.js";
import { readWeightMap, SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE } from "./safetensors.js";

/** Where and how to download; every field already resolved by the caller. */
export interface DownloadOptions {
  revision: string;
  cacheDir: string;
  /** Hub base URL, e.g. "https://huggingface.co". */
  endpoint: string;
  accessToken?: string;
  /** Draw a byte progress bar on stderr (only when stderr is a terminal). */
  progress: boolean;
  fetch: typeof fetch;
}

/** Files fetched besides the weights, when the repo has them. */
const MODEL_FILES = [
  "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
  "special_tokens_map.json", "chat_template.jinja",
];

/**
 * Download model `repoId` at `o.revision` into the cache: config, generation config, tokenizer
 * files, and the safetensors weights (the index and the shards it lists, else model.safetensors);
 * files already in the cache are skipped. Returns the snapshot folder.
 * Throws HubError when the repo has no config.json or no safetensors weights, or a file is missing;
 * errors of @huggingface/hub (HubApiError) and of `o.fetch` pass through.
 */
export async function downloadModel(repoId: string, o: DownloadOptions): Promise<string> {
  return downloadRepo(repoId, o, false, async (entries, fetchFirst, snapshot) => {
    if (!entries.has("config.json")) throw new HubError(`model ${repoId} has no config.json on the Hub (revision ${o.revision})`);
    const files = MODEL_FILES.filter((f) => entries.has(f));
    if (entries.has(SAFETENSORS_INDEX_FILE)) {
      await fetchFirst(SAFETENSORS_INDEX_FILE);
      files.push(...new Set(Object.values(await readWeightMap(join(snapshot, SAFETENSORS_INDEX_FILE)))));
    } else if (entries.has(SAFETENSORS_FILE)) {
      files.push(SAFETENSORS_FILE);
    } else {
      throw new HubError(`model ${repoId} has no safetensors weights on the Hub: looked for ${SAFETENSORS_FILE} and ${SAFETENSORS_INDEX_FILE}`);
    }
    return files;
  });
}

/**
 * Download the files `choose` picks of repo `repoId` at `o.revision` into the cache (as
 * downloadModel; used for kernel repositories too). `choose` sees every file of the revision
 * (all folders when `recursive`), may fetch some first (e.g. an index naming the rest), and returns
 * the files to fetch. Returns the snapshot folder.
 */
export async function downloadRepo(repoId: string, o: DownloadOptions, recursive: boolean,
  choose: (entries: ReadonlyMap<string, ListFileEntry>, fetchFirst: (file: string) => Promise<void>, snapshot: string) => Promise<string[]>): Promise<string> {
  const hub = { repo: { type: "model" as const, name: repoId }, hubUrl: o.endpoint, accessToken: o.accessToken, fetch: o.fetch };
  const { sha: commit } = await modelInfo({ ...hub, name: repoId, revision: o.revision, additionalFields: ["sha"] });
  const repoFolder = repoCacheFolder(o.cacheDir, repoId);
  await writeRef(repoFolder, o.revision, commit);
  const snapshot = snapshotFolder(repoFolder, commit);

  const entries = new Map<string, ListFileEntry>();
  for await (const entry of listFiles({ ...hub, revision: commit, recursive })) if (entry.type === "file") entries.set(entry.path, entry);
  const entry = (file: string) => {
    const e = entries.get(file);
    if (!e) throw new HubError(`${repoId} has no file ${file} on the Hub (revision ${o.revision})`);
    return e;
  };
  const fetchToCache = async (file: string, onBytes: (n: number) => void) => {
    const e = entry(file);
    // Blob name as huggingface_hub chooses it: sha256 for LFS/Xet files, else the git blob sha1.
    const etag = e.lfs?.oid ?? e.xetHash ?? e.oid;
    if (!etag) throw new HubError(`the Hub gave no hash for ${file} of ${repoId}`);
    if (existsSync(join(snapshot, file))) {
      onBytes(e.size);
      return;
    }
    const blob = blobPath(repoFolder, etag);
    if (!existsSync(blob)) {
      const data = await downloadFile({ ...hub, path: file, revision: commit });
      if (!data) throw new HubError(`${repoId} has no file ${file} on the Hub (revision ${o.revision})`);
      await mkdir(dirname(blob), { recursive: true });
      const incomplete = `${blob}.incomplete`;
      await pipeline(Readable.fromWeb(data.stream() as ReadableStream<Uint8Array>), async function* (chunks: AsyncIterable<Buffer>) {
        for await (const chunk of chunks) {
          onBytes(chunk.length);
          yield chunk;
        }
      }, createWriteStream(incomplete));
      await rename(incomplete, blob);
    }
    await linkBlob(repoFolder, commit, file, etag);
  };

  const files = await choose(entries, (f) => fetchToCache(f, () => {}), snapshot);
  const total = files.reduce((sum, f) => sum + entry(f).size, 0);
  const bar = o.progress && process.stderr.isTTY ? startProgressBar(repoId, total) : undefined;
  try {
    for (const file of files) await fetchToCache(file, (n) => bar?.increment(n));
  } finally {
    bar?.stop();
  }
  return snapshot;
}

/** A bar on stderr counting bytes, shown in MB. */
function startProgressBar(label: string, totalBytes: number): cliProgress.SingleBar {
  const bar = new cliProgress.SingleBar({
    stream: process.stderr,
    format: `${label} {bar} {percentage}% | {value}/{total} MB | {eta_formatted}`,
    formatValue: (v, options, type) =>
      type === "value" || type === "total" ? (v / 1e6).toFixed(1) : cliProgress.Format.ValueFormat(v, options, type),
  }, cliProgress.Presets.shades_classic);
  bar.start(totalBytes, 0);
  return bar;
}
