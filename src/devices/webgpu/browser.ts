/** Registers the webgpu device (on navigator.gpu, ./navigator_adapter.ts) and its kernels in a browser. */
import { registerKernels, restrictPoolDtypes } from "../kernels.js";
import { registerDevice } from "../registry.js";
import { openWebGPU } from "./device.js";
import { FLOAT32_POOL_OPS, webgpuKernels } from "./kernels/index.js";
import { BROWSER_HINT, navigatorAdapter } from "./navigator_adapter.js";

registerDevice("webgpu", { open: (index) => openWebGPU(index, navigatorAdapter), description: BROWSER_HINT });
registerKernels("webgpu", webgpuKernels);
for (const op of FLOAT32_POOL_OPS) restrictPoolDtypes(op, "webgpu", ["float32"]);
