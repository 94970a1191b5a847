/**
 * The built-in devices: cpu is registered eagerly; webgpu lazily, so it is listed among the
 * available devices but its module (and Dawn) is loaded only when a webgpu device is opened.
 * Imported once by each package entry point.
 */
import "./cpu/index.js";
import { registerDeviceLoader } from "./registry.js";

registerDeviceLoader("webgpu", () => import("./webgpu/index.js").then(() => {}));
