/**
 * Registers the webgpu device (on Dawn, ./dawn.ts) and its kernels in Node. Loaded lazily
 * (devices/builtin.ts registers a loader), so the `webgpu` package is imported only when a webgpu
 * device is first opened. Browsers register it through ./browser.ts instead.
 */
import { registerKernels, restrictPoolDtypes } from "../kernels.js";
import { registerDevice } from "../registry.js";
import { INSTALL_HINT, dawnAdapter } from "./dawn.js";
import { openWebGPU } from "./device.js";
import { FLOAT32_POOL_OPS, webgpuKernels } from "./kernels/index.js";

registerDevice("webgpu", { open: (index) => openWebGPU(index, dawnAdapter), description: INSTALL_HINT });
registerKernels("webgpu", webgpuKernels);
for (const op of FLOAT32_POOL_OPS) restrictPoolDtypes(op, "webgpu", ["float32"]);
