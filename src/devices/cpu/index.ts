/** Registers the cpu device and its kernels. Imported once by the package entry points. */
import { registerKernels } from "../kernels.js";
import { registerDevice } from "../registry.js";
import { CpuDevice } from "./device.js";
import { cpuKernels } from "./kernels.js";

let device: CpuDevice | undefined;
registerDevice("cpu", { synchronous: true, open: () => (device ??= new CpuDevice()) });
registerKernels("cpu", cpuKernels());
