/**
 * Download the files a model needs from the Hugging Face Hub into the shared cache layout (cache.ts).
 * Talks to the Hub through @huggingface/hub (modelInfo, listFiles, fileDownloadInfo, downloadFile:
 * auth, redirects, Xet storage) but writes blobs and snapshot links itself: the library's
 * downloadFileToCacheDir prints "Downloading …" to stdout with console.debug and offers no
 * progress callback. Every request has a timeout (timeouts.ts). As huggingface_hub does, a file
 * is written to blobs/<etag>.incomplete and renamed when complete; an interrupted download
 * resumes from the bytes already there (an HTTP Range request), within the same call (up to
 * MAX_RESUMES times while bytes keep arriving) and in a later one.
 */
import { createWriteStream, existsSync, statSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream } from "node:stream/web";
import { downloadFile, fileDownloadInfo, listFiles, modelInfo, type ListFileEntry } from "@huggingface/hub";
import cliProgress from "cli-progress";
import { blobPath, linkBlob, repoCacheFolder, snapshotFolder, writeRef } from "./cache.js";
import { HubError } from "./errors.js";
import { readWeightMap, SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE } from "./safetensors.js";
import { DOWNLOAD_TIMEOUT_ENV, ETAG_TIMEOUT_ENV, fetchWithIdleTimeout, type HubTimeouts } from "./timeouts.js";

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
  /** Idle timeouts of metadata requests and of downloads. */
  timeouts: HubTimeouts;
}

/** How many times one call resumes an interrupted download that made progress (huggingface_hub: 5). */
const MAX_RESUMES = 5;

/** Files fetched besides the weights, when the repo has them. */
const MODEL_FILES = [
  "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
  "special_tokens_map.json", "chat_template.jinja",
];

/**
 * Download model `repoId` at `o.revision` into the cache: config, generation config, tokenizer
 * files, and the safetensors weights (the index and the shards it lists, else model.safetensors);
 * files already in the cache are skipped. Returns the snapshot folder.
 * Throws HubError when the repo has no config.json or no safetensors weights, a file is missing,
 * a request times out, or a download fails (naming the file, the bytes received and the
 * .incomplete file kept for resuming); errors of @huggingface/hub (HubApiError) and of `o.fetch`
 * pass through.
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
  const metadataFetch = fetchWithIdleTimeout(o.fetch, o.timeouts.metadataMs, ETAG_TIMEOUT_ENV);
  const dataFetch = fetchWithIdleTimeout(o.fetch, o.timeouts.downloadMs, DOWNLOAD_TIMEOUT_ENV);
  const hub = { repo: { type: "model" as const, name: repoId }, hubUrl: o.endpoint, accessToken: o.accessToken, fetch: metadataFetch };
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
      const info = await fileDownloadInfo({ ...hub, path: file, revision: commit });
      const data = info && await downloadFile({ ...hub, fetch: dataFetch, path: file, revision: commit, downloadInfo: info });
      if (!data) throw new HubError(`${repoId} has no file ${file} on the Hub (revision ${o.revision})`);
      await mkdir(dirname(blob), { recursive: true });
      await downloadResuming(data, `${blob}.incomplete`, e.size, `${file} of ${repoId}`, onBytes);
      await rename(`${blob}.incomplete`, blob);
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

/**
 * Write `data` (`size` bytes) to `incomplete`, continuing after the bytes already in it. A failure
 * after some progress resumes from where it stopped, up to MAX_RESUMES times; a file longer than
 * `size` (a server that ignored the Range) is discarded and fetched again. Throws HubError naming
 * `what`, the bytes received and the kept file.
 */
async function downloadResuming(data: Blob, incomplete: string, size: number, what: string, onBytes: (n: number) => void): Promise<void> {
  const have = () => (existsSync(incomplete) ? statSync(incomplete).size : 0);
  let counted = 0; // bytes of this file reported through onBytes
  const count = (n: number) => {
    counted += n;
    onBytes(n);
  };
  for (let resumes = 0; ; resumes++) {
    let start = have();
    if (start > size) {
      await rm(incomplete);
      start = 0;
    }
    if (counted !== start) count(start - counted);
    if (start === size) return;
    const out = createWriteStream(incomplete, { flags: start > 0 ? "a" : "w" });
    try {
      const stream = (start > 0 ? data.slice(start) : data).stream() as ReadableStream<Uint8Array>;
      await pipeline(Readable.fromWeb(stream), async function* (chunks: AsyncIterable<Buffer>) {
        for await (const chunk of chunks) {
          count(chunk.length);
          yield chunk;
        }
      }, out).finally(() => out.closed || once(out, "close"));
      if (have() !== size) throw new Error(`the server sent ${have() - start} bytes from byte ${start}, the file has ${size}`);
    } catch (e) {
      const now = have();
      if (now !== start && resumes < MAX_RESUMES) continue; // progress, or too many bytes to discard above
      if (now > size) await rm(incomplete);
      throw new HubError(`downloading ${what} failed at byte ${Math.min(now, size)} of ${size}` +
        (now > 0 && now <= size ? ` (kept in ${incomplete}; the next attempt resumes from there)` : "") +
        `: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }
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
