/**
 * What the browser entry points install instead of Node's pieces: the cpu device (it holds data in
 * a page — weights pass through it on their way to the GPU — but its kernels are a Node addon, so
 * its ops throw naming webgpu), the webgpu device on navigator.gpu, and the fetch + Cache API
 * model source.
 */
import "../devices/cpu/index.js";
import "../devices/webgpu/browser.js";
import { fetchSource } from "../hub/fetch_source.js";
import { setModelSource } from "../hub/source.js";

setModelSource(fetchSource);
