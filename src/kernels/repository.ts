/**
 * Resolving a kernel repository — a local folder or a Hub id "org/name" — to a local folder, through
 * the same Hugging Face cache and @huggingface/hub download as models (src/hub): versions are the
 * branches v1, v2, …; a revision is a branch, tag or commit. A cached snapshot whose variant
 * metadata and the files it names are all present is used without any request.
 */
import { hubTimeouts } from "../hub/timeouts.js";
import { existsSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { HubApiError } from "@huggingface/hub";
import { cachedCommit, hubCacheDir, repoCacheFolder, snapshotFolder } from "../hub/cache.js";
import { downloadRepo } from "../hub/download.js";
import { HubError } from "../hub/errors.js";
import { readMetadata, VARIANTS } from "./metadata.js";

export interface KernelRepoOptions {
  /** Major version: the branch `v<version>`. */
  version?: number;
  /** Branch, tag or commit (overrides version). */
  revision?: string;
  /** Cache root (default: the Hugging Face cache, as for models). */
  cacheDir?: string;
  /** Hub base URL (default HF_ENDPOINT, else https://huggingface.co). */
  endpoint?: string;
  accessToken?: string;
  fetch?: typeof fetch;
}

/** A resolved repository: its folder, and for Hub ids the id and commit. */
export interface KernelRepo { dir: string; repoId?: string; commit?: string; }

const HUB_ID = /^(?:\w|\w[\w.-]*\w)\/(?:\w|\w[\w.-]*\w)$/;

/** Whether `id` reads as a Hub id rather than a path. */
export function isHubId(id: string): boolean {
  return HUB_ID.test(id) && !existsSync(id);
}

/** Files a snapshot must hold to be complete: every variant's metadata and the files it names. */
function complete(dir: string): boolean {
  if (!existsSync(join(dir, "build"))) return false;
  for (const v of VARIANTS) {
    const meta = join(dir, "build", v, "metadata.json");
    if (!existsSync(join(dir, "build", v))) continue;
    if (!existsSync(meta)) return false;
    const m = readMetadata(meta, v);
    const files = [m.module, ...Object.values(m.ops).flatMap((op) => (op.dispatches ?? []).map((d) => d.source))];
    if (files.some((f) => f && !existsSync(join(dir, "build", v, f)))) return false;
  }
  return true;
}

/**
 * The folder of kernel repository `repoOrDir`. Throws HubError naming the kernel: folder not
 * found, version/revision not on the Hub, not cached with HF_HUB_OFFLINE set, Hub unreachable.
 */
export async function resolveKernelRepo(repoOrDir: string, o: KernelRepoOptions = {}): Promise<KernelRepo> {
  if (existsSync(repoOrDir)) {
    if (!statSync(repoOrDir).isDirectory()) throw new HubError(`kernel ${repoOrDir} is a file, not a kernel repository folder`);
    if (o.revision !== undefined) throw new HubError(`kernel ${repoOrDir} is a local folder: a revision (${o.revision}) applies to Hub repositories only`);
    return { dir: resolve(repoOrDir) };
  }
  if (!HUB_ID.test(repoOrDir) || /--|\.\./.test(repoOrDir)) throw new HubError(`kernel repository not found: ${repoOrDir} is neither a folder nor a Hub id "org/name"`);
  if (o.version !== undefined && (!Number.isInteger(o.version) || o.version < 1)) throw new HubError(`kernel ${repoOrDir}: version must be a positive integer, got ${o.version}`);
  const revision = o.revision ?? (o.version !== undefined ? `v${o.version}` : "main");
  const cacheDir = o.cacheDir ?? hubCacheDir();
  const repoFolder = repoCacheFolder(cacheDir, repoOrDir);
  const where = `kernel ${repoOrDir}${revision === "main" ? "" : ` (${o.revision ? "revision" : "version"} ${o.revision ?? o.version})`}`;
  const cached = cachedCommit(repoFolder, revision);
  if (cached && complete(snapshotFolder(repoFolder, cached))) return { dir: snapshotFolder(repoFolder, cached), repoId: repoOrDir, commit: cached };
  if (/^(1|on|yes|true)$/i.test(process.env.HF_HUB_OFFLINE ?? "")) throw new HubError(`${where} is not in the Hugging Face cache (${cacheDir}) and HF_HUB_OFFLINE is set`);
  const endpoint = (o.endpoint ?? process.env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, "");
  const base = o.fetch ?? fetch;
  const hubFetch: typeof fetch = async (input, init) => {
    try {
      return await base(input, init);
    } catch (e) {
      throw new HubError(`${where} is not in the Hugging Face cache (${cacheDir}) and the Hub could not be reached: ${(e as Error).cause ?? (e as Error).message}`, { cause: e });
    }
  };
  try {
    const dir = await downloadRepo(repoOrDir, {
      revision, cacheDir, endpoint, fetch: hubFetch, timeouts: hubTimeouts(), accessToken: o.accessToken ?? (process.env.HF_TOKEN || undefined), progress: false,
    }, true, async (entries) => [...entries.keys()]);
    return { dir, repoId: repoOrDir, commit: dir.split(/[\\/]/).pop() };
  } catch (e) {
    if (e instanceof HubError) throw e;
    if (e instanceof HubApiError && e.statusCode === 404) throw new HubError(`${where} not found on the Hub (${e.message})`, { cause: e });
    throw new HubError(`downloading ${where} from ${endpoint} failed: ${(e as Error).message}`, { cause: e });
  }
}
