/** kernels/: a hub of versioned, sandboxed (WGSL / WebAssembly) per-device kernels, swapped into layers by kernelize. */
export { getKernel, Kernel, type GetKernelOptions, type KernelOp } from "./kernel.js";
export { kernelize, LayerRepository, type KernelizeOptions, type KernelMapping } from "./kernelize.js";
export { LAYER_CONTRACTS } from "./layers.js";
export { LOCK_FILE, lockEntry, readLock, verifyLocked, writeLock, type KernelsLock, type LockEntry } from "./lock.js";
export { readMetadata, VARIANTS, type VariantMetadata } from "./metadata.js";
export { resolveKernelRepo, isHubId, type KernelRepoOptions } from "./repository.js";
export { useKernelForwardFromHub } from "../nn/kernel_hub.js";
