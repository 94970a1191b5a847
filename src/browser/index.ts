/**
 * tsorch in browsers (package.json "exports", condition "browser"): the tensor API of ../index.ts
 * with the browser's devices — webgpu on navigator.gpu, and cpu for data only (see ./environment.ts).
 */
import "./environment.js";
export * from "../tensor/index.js";
export { openDevice, getDevice, deviceTypes, registerDevice, registerDeviceLoader } from "../devices/registry.js";
export { registerKernel, registerKernels, getKernel, registeredOps, type KernelSignatures, type OpName } from "../devices/kernels.js";
export type { Device, Storage } from "../devices/device.js";
export { compile, compiler, type CompileOptions, type CompilerStats } from "../compile/index.js";
