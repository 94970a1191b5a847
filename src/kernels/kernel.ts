/**
 * getKernel: load a kernel repository (checked against the sandbox rule and, when given, a
 * kernels.lock) and expose its ops as methods. Each call runs the variant for the device of its
 * tensors: webgpu → build/webgpu-wgsl, cpu → build/cpu-wasm.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Tensor } from "../tensor/tensor.js";
import { readLock, verifyLocked, type KernelsLock } from "./lock.js";
import { readMetadata, VARIANT_DEVICE, VARIANTS, variantFor, type Variant, type VariantMetadata } from "./metadata.js";
import { resolveKernelRepo, type KernelRepoOptions } from "./repository.js";
import { WasmModule } from "./run_wasm.js";
import { runWgsl } from "./run_wgsl.js";
import { checkSandbox } from "./sandbox.js";

/** An op of a kernel: tensors then scalars, as its signature lists them; returns its output (or outputs by name). */
export type KernelOp = (...args: (Tensor | number)[]) => Tensor;

export interface GetKernelOptions extends KernelRepoOptions {
  /** A kernels.lock (path or parsed): a Hub id it pins loads that revision, and every file must match its sha256. */
  lock?: string | KernelsLock;
}

/** A loaded kernel repository. Its ops are also properties: `kernel.rmsNorm(x, w, eps)`. */
export class Kernel {
  readonly name: string;
  readonly version: number;
  /** Variants present, by name. */
  readonly variants: Partial<Record<Variant, VariantMetadata>> = {};
  private wasm?: WasmModule;
  private readonly sources = new Map<string, string>();

  constructor(readonly id: string, readonly dir: string, readonly commit?: string) {
    checkSandbox(id, dir);
    for (const v of VARIANTS) {
      const meta = join(dir, "build", v, "metadata.json");
      if (existsSync(join(dir, "build", v))) this.variants[v] = readMetadata(meta, v);
    }
    const first = Object.values(this.variants)[0]!;
    this.name = first.name;
    this.version = first.version;
    for (const op of new Set(Object.values(this.variants).flatMap((m) => Object.keys(m.ops)))) {
      if (op in this) throw new Error(`kernel ${id}: op name ${op} is reserved`);
      (this as unknown as Record<string, KernelOp>)[op] = (...args) => this.call(op, args);
    }
  }

  /** Device types this kernel has a variant for. */
  get devices(): string[] {
    return Object.keys(this.variants).map((v) => VARIANT_DEVICE[v as Variant]);
  }

  /** The op implementing tsorch's contract for layer `layer` on `deviceType`, if the kernel has one. */
  layerOp(layer: string, deviceType: string): string | undefined {
    const v = variantFor(deviceType);
    return v ? this.variants[v]?.layers?.[layer] : undefined;
  }

  /** Run op `op` on `args`; the device of the first tensor picks the variant. Returns its single output. */
  call(op: string, args: (Tensor | number)[]): Tensor {
    const outs = this.callAll(op, args);
    return Object.values(outs)[0];
  }

  /** Run op `op`; returns every output by name. */
  callAll(op: string, args0: (Tensor | number)[]): Record<string, Tensor> {
    const args = args0.map((a) => (typeof a === "object" ? a.contiguous() : a));
    const t = args.find((a): a is Tensor => typeof a === "object");
    if (!t) throw new TypeError(`kernel ${this.id}: op ${op} needs tensor arguments`);
    const v = variantFor(t.device.type);
    const meta = v && this.variants[v];
    if (!meta) throw new Error(`kernel ${this.id} has no variant for device ${t.device.type} (it has ${Object.keys(this.variants).join(", ")})`);
    const spec = meta.ops[op];
    if (!spec) throw new Error(`kernel ${this.id}: variant ${v} has no op ${op} (it has ${Object.keys(meta.ops).join(", ")})`);
    if (v === "cpu-wasm") {
      this.wasm ??= new WasmModule(this.id, new Uint8Array(readFileSync(join(this.dir, "build", v, meta.module!))));
      return this.wasm.run(op, spec, args);
    }
    return runWgsl(this.id, `${this.id}@${this.commit ?? this.dir}`, op, spec, (f) => this.source(join(this.dir, "build", v!, f)), args);
  }

  private source(file: string): string {
    let s = this.sources.get(file);
    if (s === undefined) {
      if (!file.endsWith(".wgsl")) throw new Error(`kernel ${this.id}: dispatch source ${file} is not a .wgsl file`);
      s = readFileSync(file, "utf8");
      this.sources.set(file, s);
    }
    return s;
  }
}

/**
 * Load kernel repository `repoOrDir` (a folder, or a Hub id at `version` / `revision`) —
 * `get_kernel` of the `kernels` library. With `lock`, a Hub id it pins is loaded at the locked
 * commit and every file is checked against its sha256. A folder has no revisions (asking for one
 * throws); a version asked of a folder must equal its metadata's version. Throws on a refused repository (native
 * code, unknown variant), a lock mismatch, or a resolution error (see resolveKernelRepo).
 */
export async function getKernel(repoOrDir: string, o: GetKernelOptions = {}): Promise<Kernel & Record<string, KernelOp>> {
  const lock = typeof o.lock === "string" ? readLock(o.lock) : o.lock;
  const pinned = lock?.[repoOrDir];
  if (pinned && o.revision && o.revision !== pinned.revision) {
    throw new Error(`kernel ${repoOrDir}: revision ${o.revision} was asked for but kernels.lock pins ${pinned.revision}`);
  }
  const repo = await resolveKernelRepo(repoOrDir, pinned ? { ...o, revision: pinned.revision } : o);
  if (pinned) verifyLocked(repoOrDir, repo.dir, pinned);
  const kernel = new Kernel(repoOrDir, repo.dir, repo.commit) as Kernel & Record<string, KernelOp>;
  if (!repo.repoId && o.version !== undefined && kernel.version !== o.version) {
    throw new Error(`kernel folder ${repoOrDir} holds version ${kernel.version} (its metadata.json), not the version ${o.version} asked for`);
  }
  return kernel;
}
