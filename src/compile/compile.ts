/**
 * torch.compile for tsorch: `compile(fn)` or `compile(module)` returns a function with the same
 * signature. The first call with a new guard key (compile/guards.ts: the arguments' tensor
 * metadata, JS values, object identities) runs `fn` once eagerly under capture
 * (compile/capture.ts), and compiles the recorded graph: dead-code elimination, a memory plan for
 * intermediates, and the device's graph runner (compile/program.ts). Later calls with the same key
 * replay that graph: no tracing and no front-end work per op. For a module, the identity of every
 * parameter tensor (and of the tensors a layer computes with in a parameter's place, such as a
 * Linear's quantized weight: Module.loadedTensors) is guarded too: replacing one recompiles.
 *
 * Graph breaks (reading values, host data built inside the function, async functions; see
 * capture.ts) are counted and reported: that call's eager result is returned and later calls with
 * the same key run eagerly, so a result is never silently wrong. Calls made while another compiled
 * function is being captured run eagerly, so they are traced into the outer graph.
 *
 * What a replay cannot see (document, do not rely on): tensors a function reaches through its
 * closure are read in place (their current values, good for a KV cache) but a closure variable
 * re-pointed at a new tensor is not noticed; JS values computed inside from closure state are baked.
 *
 * Returned tensors are fresh storage on every replay (the only allocation a replay makes). One
 * function keeps at most RECOMPILE_LIMIT graphs; further new guard keys run eagerly (logged once).
 */
import type { Device } from "../devices/device.js";
import { Module, parameterEpoch } from "../nn/module.js";
import type { Tensor } from "../tensor/tensor.js";
import { capture, capturing } from "./capture.js";
import { flattenArgs, guardKey, leavesByIdentity, nearestFailedGuard, recentCall, sameLeaves, type Leaf, type RecentCall } from "./guards.js";
import { GraphProgram, hiddenTensor } from "./program.js";
import { cacheGeneration, record } from "./stats.js";

export interface CompileOptions {
  /** The name used in stats and logs (default: the function's or module class's name). */
  name?: string;
}

type Entry = { leaves: Leaf[]; program: GraphProgram | null };

/** Most graphs one compiled function keeps (PyTorch's recompile_limit, raised: prompt buckets
 * plus the decode step must fit); calls with further new guard keys run eagerly. */
export const RECOMPILE_LIMIT = 64;

/** A module with a forward method; compile(module) compiles forward. */
export interface Forward<F extends (...args: any[]) => any> extends Module {
  forward: F;
}

/**
 * Compile a function of tensors (any arguments: tensors, numbers, arrays and records of them) or
 * a Module's forward. Returns a function with the same signature; see the file comment for what is
 * guarded and what breaks a graph. Throws TypeError when given neither a function nor a module
 * with a forward method.
 */
export function compile<F extends (...args: any[]) => any>(target: F | Forward<F>, opts: CompileOptions = {}): F {
  let fn: F;
  let params: () => Tensor[];
  let paramName: (i: number) => string;
  if (target instanceof Module) {
    if (typeof (target as Forward<F>).forward !== "function") throw new TypeError(`compile: module ${target.constructor.name} has no forward method`);
    fn = (target as Forward<F>).forward.bind(target) as F;
    params = () => target.loadedTensors();
    paramName = (i) => [...target.loadedTensorNames()][i] ?? `#${i}`;
  } else if (typeof target === "function") {
    fn = target;
    params = () => [];
    paramName = (i) => `#${i}`;
  } else {
    throw new TypeError(`compile: expected a function or a Module with forward, got ${target === null ? "null" : typeof target}`);
  }
  const name = opts.name ?? (target instanceof Module ? target.constructor.name : target.name || "<anonymous>");
  const cache = new Map<string, Entry>();
  let latest: Entry | null = null;
  /** The last call, when it guarded as `latest` (leavesByIdentity matches the next one against it). */
  let recent: RecentCall | null = null;
  let watched = params();
  let watchedEpoch = parameterEpoch();
  let generation = cacheGeneration();
  let overLimit = false;

  const compiled = function (this: unknown, ...args: unknown[]): unknown {
    if (capturing()) return fn.apply(this, args);
    if (generation !== cacheGeneration()) {
      cache.clear();
      latest = recent = null;
      overLimit = false;
      generation = cacheGeneration();
    }
    // Parameters are reread only when some module's changed since the last call (parameterEpoch).
    let replaced: string | null = null;
    const epoch = parameterEpoch();
    if (epoch !== watchedEpoch) {
      const current = params();
      replaced = changedParam(watched, current, paramName);
      watched = current;
      watchedEpoch = epoch;
    }
    if (replaced !== null) {
      cache.clear();
      overLimit = false;
      if (latest) record.recompile(name, `parameter ${replaced} was replaced by another tensor`);
      latest = recent = null;
    }
    // A call guarded like the last one (each decode step) is matched by identity where it can be,
    // else leaf by leaf; others by key.
    const byIdentity = latest && recent ? leavesByIdentity(recent, args) : null;
    const leaves = byIdentity ?? flattenArgs(args);
    const same = byIdentity || (latest && sameLeaves(latest.leaves, leaves)) ? latest : null;
    const key = same ? "" : guardKey(leaves);
    const hit = same ?? cache.get(key);
    if (hit) {
      latest = hit;
      if (!byIdentity) recent = recentCall(args, leaves);
      if (!hit.program) return fn.apply(this, args);
      record.hit();
      return hit.program.run(leaves);
    }
    if (cache.size >= RECOMPILE_LIMIT) {
      if (!overLimit) record.recompile(name, `recompile limit (${RECOMPILE_LIMIT} graphs) reached: calls with new guards run eagerly`);
      overLimit = true;
      return fn.apply(this, args);
    }
    if (latest && replaced === null) record.recompile(name, nearestFailedGuard([...cache.values()].map((e) => e.leaves), leaves));
    record.compile();
    const cap = capture(() => fn.apply(this, args));
    const why = cap.breakReason ?? hiddenTensor(cap.result)?.replace(/^/, "tensors returned inside a class instance cannot be rebuilt: ") ?? null;
    let program: GraphProgram | null = null;
    if (why) record.graphBreak(name, why);
    else if (cap.device || deviceOf(leaves)) {
      program = new GraphProgram(cap, leaves, (cap.device ?? deviceOf(leaves))!);
      record.graph(name, program.info);
    }
    latest = { leaves, program };
    recent = recentCall(args, leaves);
    cache.set(key, latest);
    return cap.result;
  };
  Object.defineProperty(compiled, "name", { value: name });
  return compiled as unknown as F;
}

function deviceOf(leaves: readonly Leaf[]): Device | null {
  return leaves.find((l) => l.tensor)?.tensor?.device ?? null;
}

/** The name of the first parameter whose tensor changed (`name` of its index), or null. */
function changedParam(before: readonly Tensor[], now: readonly Tensor[], name: (i: number) => string): string | null {
  if (before.length !== now.length) return `list (${before.length} -> ${now.length} loaded parameters)`;
  for (let i = 0; i < now.length; i++) if (before[i] !== now[i]) return `'${name(i)}'`;
  return null;
}
