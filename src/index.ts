/**
 * tsorch: tensors on any device. Importing this module registers the built-in devices
 * (cpu eagerly; webgpu lazily, on first open).
 */
import "./devices/builtin.js";
export * from "./tensor/index.js";
export { openDevice, getDevice, deviceTypes, registerDevice, registerDeviceLoader } from "./devices/registry.js";
export { registerKernel, registerKernels, getKernel, registeredOps, type KernelSignatures, type OpName } from "./devices/kernels.js";
export type { Device, Storage } from "./devices/device.js";
export { compile, compiler, type CompileOptions, type CompilerStats } from "./compile/index.js";
