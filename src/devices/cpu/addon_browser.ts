/**
 * `#cpu-addon` in browsers (package.json "imports", condition "browser"): the cpu device's kernels
 * are a native Node addon, which a page cannot load. cpu tensors still hold data (weights are
 * staged there on their way to the GPU); running an op on them throws this error.
 */

/** Always throws: the cpu device has no kernels in a browser. */
export function loadCpuAddon(): never {
  throw new Error("the cpu device has no kernels in a browser (they are tsorch's native Node addon): " +
    "use the webgpu device, e.g. fromPretrained(model, { device: \"webgpu\" }) or tensor.to(\"webgpu\")");
}
