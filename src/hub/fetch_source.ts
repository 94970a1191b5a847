/**
 * The model source of browsers: files come over HTTP with `fetch` and are kept in the browser's
 * Cache API (cache "tsorch-models"), so a reload reads them from there instead of the network.
 * A model is named by
 * - a URL base: absolute ("https://host/models/x") or relative to the page ("/models/x", "./x",
 *   "../x"), the folder holding config.json, tokenizer.json and the safetensors files;
 * - a Hub id "org/name": https://huggingface.co/<id>/resolve/<revision>/<file>.
 * Large files stream with progress (SourceOptions.onProgress); safetensors are parsed by the same
 * code as in Node (./safetensors_format.ts), single or sharded.
 */
import { CheckpointError, HubError } from "./errors.js";
import { isHubId } from "./hub_id.js";
import {
  assembleShards, parseSafetensors, parseWeightMap, SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, type RawTensor,
} from "./safetensors_format.js";
import { parseJsonObject, type DownloadProgress, type ModelSource, type SourceOptions } from "./source.js";

/** The Cache API cache holding downloaded model files (`caches.delete(MODEL_CACHE)` empties it). */
export const MODEL_CACHE = "tsorch-models";
/** Where Hub ids are fetched from. */
export const HUB_ENDPOINT = "https://huggingface.co";

/**
 * The URL base (ending in "/") of model `pathOrId`, relative URLs resolved against `pageUrl`.
 * Throws HubError when it is neither a URL nor a Hub id.
 */
export function modelBaseUrl(pathOrId: string, pageUrl: string, revision = "main"): string {
  const withSlash = (u: string) => (u.endsWith("/") ? u : `${u}/`);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(pathOrId)) return withSlash(pathOrId);
  if (/^\.{0,2}\//.test(pathOrId)) return withSlash(new URL(pathOrId, pageUrl).href);
  if (isHubId(pathOrId)) return `${HUB_ENDPOINT}/${pathOrId}/resolve/${encodeURIComponent(revision)}/`;
  throw new HubError(`invalid model "${pathOrId}": expected a URL ("https://…", "/models/x", "./x") or a Hugging Face Hub id "org/name"`);
}

/** The Cache API cache, or undefined where the page has none (not a secure context, or no `caches`). */
async function openCache(): Promise<Cache | undefined> {
  const caches = (globalThis as { caches?: CacheStorage }).caches;
  if (!caches) return undefined;
  try {
    return await caches.open(MODEL_CACHE);
  } catch {
    return undefined;
  }
}

/**
 * The bytes of `url`, from the model cache when it holds them, else fetched (and then cached).
 * Returns undefined for a 404. Reports progress as bytes arrive. Throws HubError when the request
 * fails or answers another error status.
 */
export async function fetchBytes(url: string, onProgress?: (p: DownloadProgress) => void): Promise<Uint8Array | undefined> {
  const cache = await openCache();
  const cached = await cache?.match(url);
  let response = cached;
  if (!response) {
    try {
      response = await fetch(url);
    } catch (e) {
      throw new HubError(`cannot fetch ${url}: ${(e as Error).message}`, { cause: e });
    }
    if (response.status === 404) return undefined;
    if (!response.ok) throw new HubError(`cannot fetch ${url}: HTTP ${response.status} ${response.statusText}`);
  }
  const bytes = await readBody(response, url, onProgress);
  if (!cached && cache) {
    const type = response.headers.get("content-type") ?? "application/octet-stream";
    await cache.put(url, new Response(bytes, { headers: { "content-type": type, "content-length": String(bytes.byteLength) } }));
  }
  return bytes;
}

/** The whole body of `response` in one buffer, streamed chunk by chunk with progress. */
async function readBody(response: Response, url: string, onProgress?: (p: DownloadProgress) => void): Promise<Uint8Array<ArrayBuffer>> {
  const length = Number(response.headers.get("content-length"));
  // A compressed body's content-length counts compressed bytes: then the total is unknown.
  const total = Number.isSafeInteger(length) && length > 0 && !response.headers.get("content-encoding") ? length : undefined;
  const file = url.slice(url.lastIndexOf("/") + 1);
  let buf = new Uint8Array(new ArrayBuffer(total ?? 1 << 16));
  let loaded = 0;
  const reader = response.body?.getReader();
  try {
    for (;;) {
      const chunk = reader ? await reader.read() : { done: true as const, value: undefined };
      if (chunk.done) break;
      if (loaded + chunk.value.byteLength > buf.byteLength) {
        const grown = new Uint8Array(new ArrayBuffer(Math.max(buf.byteLength * 2, loaded + chunk.value.byteLength)));
        grown.set(buf.subarray(0, loaded));
        buf = grown;
      }
      buf.set(chunk.value, loaded);
      loaded += chunk.value.byteLength;
      onProgress?.({ file, loaded, total });
    }
  } catch (e) {
    throw new HubError(`downloading ${url} failed after ${loaded} bytes: ${(e as Error).message}`, { cause: e });
  }
  return loaded === buf.byteLength ? buf : buf.slice(0, loaded);
}

/** The fetch + Cache API model source (see the file comment); the browser entry points install it. */
export const fetchSource: ModelSource = {
  async resolve(pathOrId: string, opts: SourceOptions): Promise<string> {
    const page = (globalThis as { location?: { href: string } }).location?.href;
    if (!page && !/^[a-z][a-z0-9+.-]*:\/\//i.test(pathOrId) && !isHubId(pathOrId)) {
      throw new HubError(`model "${pathOrId}" is a relative URL, but there is no page to resolve it against: pass an absolute URL`);
    }
    return modelBaseUrl(pathOrId, page ?? "about:blank", opts.revision);
  },

  filePath: (base: string, file: string) => new URL(file, base).href,

  async readText(base: string, file: string, opts: SourceOptions = {}): Promise<string | undefined> {
    const bytes = await fetchBytes(new URL(file, base).href, opts.onProgress);
    return bytes && new TextDecoder().decode(bytes);
  },

  async loadCheckpoint(base: string, opts: SourceOptions = {}): Promise<Map<string, RawTensor>> {
    const file = async (name: string) => {
      const url = new URL(name, base).href;
      return { url, bytes: await fetchBytes(url, opts.onProgress) };
    };
    const index = await file(SAFETENSORS_INDEX_FILE);
    if (index.bytes) {
      const weightMap = parseWeightMap(parseJsonObject(new TextDecoder().decode(index.bytes), index.url), index.url);
      const shards = new Map<string, Map<string, RawTensor>>();
      for (const name of new Set(Object.values(weightMap))) {
        const shard = await file(name);
        if (!shard.bytes) throw new CheckpointError(`${index.url}: missing shard file ${shard.url} (HTTP 404)`);
        shards.set(name, parseSafetensors(shard.bytes, shard.url));
      }
      return assembleShards(weightMap, shards, index.url);
    }
    const single = await file(SAFETENSORS_FILE);
    if (single.bytes) return parseSafetensors(single.bytes, single.url);
    throw new CheckpointError(`no safetensors checkpoint at ${base}: ${SAFETENSORS_FILE} and ${SAFETENSORS_INDEX_FILE} both answered 404`);
  },
};
