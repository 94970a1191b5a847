/**
 * `tsorch kernels lock|download` (kernels.lock, as in the `kernels` Python library) and the
 * `--kernel LAYER=DIR_OR_REPO[@version]` flag of generate/forward.
 */
import { parseArgs } from "node:util";
import { getKernel, kernelize, LayerRepository, LOCK_FILE, lockEntry, readLock, resolveKernelRepo, verifyLocked, writeLock, type KernelMapping, type KernelsLock } from "../kernels/index.js";
import type { Module } from "../nn/module.js";
import { UsageError } from "./args.js";

export const KERNELS_USAGE = `usage: tsorch kernels lock REPO[@VERSION]... [--file kernels.lock]
       tsorch kernels download [--file kernels.lock]
lock      resolve each Hub kernel repository (version N = branch vN, else main), download it into the
          Hugging Face cache, and write its revision and the sha256 of every file to the lock file
          (entries of other repositories are kept)
download  fetch every repository the lock file pins, at its revision, into the cache, checking hashes`;

/** "org/name@2" → { repo: "org/name", version: 2 }; "@v2" works too, anything else after @ is a revision. */
export function parseKernelRef(ref: string): { repo: string; version?: number; revision?: string } {
  const at = ref.lastIndexOf("@");
  if (at <= 0) return { repo: ref };
  const tail = ref.slice(at + 1), m = /^v?(\d+)$/.exec(tail);
  if (!tail) throw new UsageError(`kernel reference '${ref}' has an empty version after @`);
  return m ? { repo: ref.slice(0, at), version: Number(m[1]) } : { repo: ref.slice(0, at), revision: tail };
}

export async function kernelsCommand(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { file: { type: "string" } }, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const [sub, ...refs] = parsed.positionals;
  const file = parsed.values.file ?? LOCK_FILE;
  if (sub === "lock") {
    if (refs.length === 0) throw new UsageError(`kernels lock: name at least one Hub kernel repository (REPO[@VERSION])\n${KERNELS_USAGE}`);
    let lock: KernelsLock = {};
    try { lock = readLock(file); } catch { /* a new lock file */ }
    for (const ref of refs) {
      const { repo, version, revision } = parseKernelRef(ref);
      const r = await resolveKernelRepo(repo, { version, revision });
      if (!r.repoId) throw new UsageError(`kernels lock: ${repo} is a folder; only Hub repositories are locked`);
      const k = await getKernel(repo, { revision: r.commit });
      lock[repo] = lockEntry(r.dir, r.commit!, k.version);
      process.stdout.write(`${repo}: ${r.commit} (version ${k.version}, ${Object.keys(lock[repo].files).length} files)\n`);
    }
    await writeLock(file, lock);
    process.stdout.write(`wrote ${file}\n`);
  } else if (sub === "download") {
    if (refs.length > 0) throw new UsageError(`kernels download takes no repositories; it fetches what ${file} pins`);
    for (const [repo, entry] of Object.entries(readLock(file))) {
      const r = await resolveKernelRepo(repo, { revision: entry.revision });
      verifyLocked(repo, r.dir, entry);
      process.stdout.write(`${repo}: ${entry.revision} -> ${r.dir}\n`);
    }
  } else {
    throw new UsageError(`kernels: unknown subcommand '${sub ?? ""}'\n${KERNELS_USAGE}`);
  }
}

/**
 * Kernelize `model` (on device type `device`) with `--kernel LAYER=DIR_OR_REPO[@version]` flags;
 * a layer without a kernel for the device keeps its built-in forward (noted on stderr). Prints one
 * line on stderr naming what was swapped: "kernelized on cpu: MoE x2 <- hub-kernels/moe-grouped-gemm".
 */
export async function kernelizeFromFlags(model: Module, flags: string[], device: string): Promise<void> {
  const mapping: KernelMapping = {};
  for (const f of flags) {
    const eq = f.indexOf("=");
    if (eq <= 0 || eq === f.length - 1) throw new UsageError(`--kernel expects LAYER=DIR_OR_REPO[@version], e.g. MoE=hub-kernels/moe-grouped-gemm; got '${f}'`);
    const layer = f.slice(0, eq), { repo, version, revision } = parseKernelRef(f.slice(eq + 1));
    mapping[layer] = { [device]: new LayerRepository({ repoId: repo, layerName: layer, version, revision }) };
  }
  const replaced = await kernelize(model, { device, mode: "inference", mapping });
  const swapped = Object.keys(mapping).filter((layer) => replaced[layer]).map((layer) => {
    const r = mapping[layer][device];
    return `${layer} x${replaced[layer]} <- ${r.repoId}${r.revision ? `@${r.revision}` : r.version !== undefined ? `@v${r.version}` : ""}`;
  });
  process.stderr.write(`kernelized on ${device}: ${swapped.length ? swapped.join(", ") : "nothing swapped"}\n`);
}
