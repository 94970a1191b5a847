/**
 * Registers the webgpu device and its kernels. Loaded lazily (devices/builtin.ts registers a
 * loader), so the `webgpu` package is imported only when a webgpu device is first opened.
 */
import { registerKernels } from "../kernels.js";
import { registerDevice } from "../registry.js";
import { INSTALL_HINT, openWebGPU } from "./device.js";
import { webgpuKernels } from "./kernels/index.js";

registerDevice("webgpu", { open: openWebGPU, description: INSTALL_HINT });
registerKernels("webgpu", webgpuKernels);
