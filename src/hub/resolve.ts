/** Resolve a model name (local folder or Hugging Face Hub id) to a local folder holding its files. */
import { existsSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { HubApiError } from "@huggingface/hub";
import { cachedCommit, hubCacheDir, repoCacheFolder, snapshotFolder } from "./cache.js";
import { downloadModel, type DownloadOptions } from "./download.js";
import { HubError } from "./errors.js";
import { isHubId } from "./hub_id.js";
import { readWeightMap, SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE } from "./safetensors.js";
import { hubTimeouts } from "./timeouts.js";

export interface ResolveOptions {
  /** Branch, tag or commit hash on the Hub (default "main"). */
  revision?: string;
  /** Cache root (default: hubCacheDir(), i.e. HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub). */
  cacheDir?: string;
  /** Hub base URL (default: HF_ENDPOINT, else https://huggingface.co). */
  endpoint?: string;
  /** Hub token, "hf_…" (default: HF_TOKEN). */
  accessToken?: string;
  /** Byte progress bar on stderr while downloading, when stderr is a terminal (default true). */
  progress?: boolean;
  /** fetch used for every Hub request (default: global fetch). */
  fetch?: typeof fetch;
}

/**
 * The local folder holding model `idOrPath`'s files (config.json, tokenizer, safetensors):
 * - an existing folder → its absolute path ("~" expands to the home folder);
 * - a Hub id "org/name" → its snapshot in the Hugging Face cache, downloaded first unless the cache
 *   already holds config.json and the complete safetensors weights (then no network request is made).
 *   HF_HUB_OFFLINE=1 forbids downloading. Hub requests time out (HF_HUB_ETAG_TIMEOUT, default 10 s, for
 *   metadata; HF_HUB_DOWNLOAD_TIMEOUT, default 30 s without a byte, for downloads); an interrupted
 *   download resumes where it stopped (see download.ts).
 * Throws HubError: "model folder not found: X" (X looks like a path), "invalid model id",
 * "model X not found on the Hub (…)", "model X is not in the Hugging Face cache (<dir>) and the Hub
 * could not be reached: <cause>", "no response from <url> within N s (HF_HUB_ETAG_TIMEOUT)",
 * "downloading <file> of model X failed at byte B of N …", or when offline and not cached.
 */
export async function resolveModel(idOrPath: string, opts: ResolveOptions = {}, kind: RepoKind = MODEL_REPO): Promise<string> {
  const path = idOrPath === "~" || idOrPath.startsWith("~/") ? homedir() + idOrPath.slice(1) : idOrPath;
  if (existsSync(path)) {
    if (!statSync(path).isDirectory()) throw new HubError(`not a model folder: ${idOrPath} is a file`);
    return resolve(path);
  }
  const dir = dirname(path);
  if (/^(\/|\.\.?\/|~)/.test(idOrPath) || idOrPath.includes("\\") || (dir !== "." && existsSync(dir))) {
    throw new HubError(`model folder not found: ${idOrPath}`);
  }
  if (!isHubId(idOrPath)) {
    throw new HubError(`invalid model id "${idOrPath}": expected a Hugging Face Hub id "org/name" or an existing folder`);
  }

  const id = idOrPath;
  const revision = opts.revision ?? "main";
  const cacheDir = opts.cacheDir ?? hubCacheDir();
  const repoFolder = repoCacheFolder(cacheDir, id);
  const commit = cachedCommit(repoFolder, revision);
  if (commit !== undefined && await kind.complete(snapshotFolder(repoFolder, commit))) return snapshotFolder(repoFolder, commit);
  const notCached = `model ${id}${revision === "main" ? "" : ` (revision ${revision})`} is not in the Hugging Face cache (${cacheDir})`;
  if (/^(1|on|yes|true)$/i.test(process.env.HF_HUB_OFFLINE ?? "")) {
    throw new HubError(`${notCached} and HF_HUB_OFFLINE is set`);
  }

  const endpoint = (opts.endpoint ?? process.env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, "");
  const baseFetch = opts.fetch ?? fetch;
  // A fetch that throws means no connection: report it as such, whichever library call made it.
  const hubFetch: typeof fetch = async (input, init) => {
    try {
      return await baseFetch(input, init);
    } catch (e) {
      throw new HubError(`${notCached} and the Hub could not be reached: ${describeCause(e)}`, { cause: e });
    }
  };
  try {
    return await kind.download(id, {
      revision, cacheDir, endpoint, fetch: hubFetch, timeouts: hubTimeouts(),
      accessToken: opts.accessToken ?? (process.env.HF_TOKEN || undefined),
      progress: opts.progress !== false,
    });
  } catch (e) {
    if (e instanceof HubError) throw e;
    const where = `${id}${revision === "main" ? "" : ` at revision ${revision}`}`;
    if (e instanceof HubApiError && e.statusCode === 404) {
      throw new HubError(`model ${where} not found on the Hub (${e.message})`, { cause: e });
    }
    if (e instanceof HubApiError && (e.statusCode === 401 || e.statusCode === 403)) {
      throw new HubError(`model ${where} not found on the Hub, or it is private or gated and needs a token ` +
        `(pass accessToken or set HF_TOKEN) (${e.message})`, { cause: e });
    }
    throw new HubError(`downloading model ${where} from ${endpoint} failed: ${describeCause(e)}`, { cause: e });
  }
}

/** How a kind of repository is recognised complete in the cache and downloaded (a model; a diffusers pipeline). */
export interface RepoKind {
  complete(snapshot: string): Promise<boolean>;
  download(repoId: string, o: DownloadOptions): Promise<string>;
}

/** A transformers model repository: config.json and safetensors weights at the top. */
export const MODEL_REPO: RepoKind = { complete: hasModelFiles, download: downloadModel };

/** Whether `snapshot` holds config.json and complete safetensors weights. */
async function hasModelFiles(snapshot: string): Promise<boolean> {
  if (!existsSync(join(snapshot, "config.json"))) return false;
  if (existsSync(join(snapshot, SAFETENSORS_FILE))) return true;
  const index = join(snapshot, SAFETENSORS_INDEX_FILE);
  return existsSync(index) && Object.values(await readWeightMap(index)).every((shard) => existsSync(join(snapshot, shard)));
}

/** The most specific message of an error chain, e.g. "connect ECONNREFUSED 127.0.0.1:9" for a failed fetch. */
function describeCause(e: unknown): string {
  const cause = e instanceof Error && e.cause instanceof Error ? e.cause : e;
  if (cause instanceof Error) return cause.message || (cause as NodeJS.ErrnoException).code || cause.name;
  return String(cause);
}
