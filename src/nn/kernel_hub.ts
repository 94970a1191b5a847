/**
 * Swappable forwards (the `kernels` library's use_kernel_forward_from_hub): a layer class marked
 * `useKernelForwardFromHub("RMSNorm")` tells kernels/kernelize that its forward may be replaced by
 * a hub kernel implementing tsorch's contract for that layer name. Marking changes nothing else.
 */
import type { Module } from "./module.js";

const LAYER_NAME = new WeakMap<Function, string>();

/** Mark layer class `cls` as having the swappable forward `name`; returns `cls`. */
export function useKernelForwardFromHub(name: string): <C extends Function>(cls: C) => C {
  return (cls) => {
    LAYER_NAME.set(cls, name);
    return cls;
  };
}

/** The kernel layer name `m`'s class declares, if any. */
export function kernelLayerName(m: Module): string | undefined {
  return LAYER_NAME.get(m.constructor);
}
