/**
 * Guards: what a compiled graph was specialised on. A call's arguments are flattened into leaves
 * (tensors, JS values, opaque objects by identity), each with a signature; the joined signatures
 * are the cache key. A tensor leaf is guarded on dtype, device, shape, strides, offset, storage size
 * and which earlier argument it shares storage with; a number/string/boolean/null on its value;
 * an array or object walked into is a leaf too (its length, or its keys and class), then its
 * elements; anything else (a Module, a Map, a function) on its identity.
 *
 * A compiled function checks its guards on every call, so the check is kept cheap: a tensor's
 * signature is built once per Tensor object (its fields are readonly and its storage's size fixed:
 * on cpu the bytes given to fromBytes / Device.upload, which their caller must not modify) and
 * top-level paths are shared strings, so a call guarded like the one before it (a decode step: the
 * same 56 KV buffer tensors every step) is recognised by comparing leaves (sameLeaves), without
 * joining and hashing a key of some 5 KB (compile.ts). The Qwen3-0.6B-shaped compiled decode step's
 * 62 tensor arguments: 70-140 us a call to check with signatures and key rebuilt per call, 11-16 us
 * this way (in a loop of checks; inside int4 decode, whose steps evict the CPU caches the check
 * reads, 93-258 -> 31-77 us; AMD EPYC Zen 5). A call passing the previous call's objects but for
 * new tensors of the same signature on unshared storages is matched by identity before that
 * (leavesByIdentity: 56 -> 21 us a token inside the same int4 decode).
 */
import type { Storage } from "../devices/device.js";
import { Module } from "../nn/module.js";
import { Tensor } from "../tensor/tensor.js";

export interface TensorLeaf {
  readonly path: string;
  readonly tensor: Tensor;
  /** Index (among tensor leaves) of the first leaf on the same storage. */
  readonly alias: number;
  /** dtype, device, shape, strides, offset and storage size (the alias is guarded beside it). */
  readonly sig: string;
}

export interface ValueLeaf {
  readonly path: string;
  readonly tensor?: undefined;
  readonly sig: string;
}

export type Leaf = TensorLeaf | ValueLeaf;

const ids = new WeakMap<object, number>();
const symbolIds = new Map<symbol, number>();
let nextId = 1;
function identity(o: object): number {
  let id = ids.get(o);
  if (id === undefined) ids.set(o, (id = nextId++));
  return id;
}

/** A number, string, boolean, bigint, symbol, null or undefined by value (-0 apart from 0; a symbol by identity). */
function valueSig(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number" && Object.is(v, -0)) return "number:-0";
  if (typeof v === "symbol") {
    let id = symbolIds.get(v);
    if (id === undefined) symbolIds.set(v, (id = nextId++));
    return `symbol#${id}`;
  }
  return `${typeof v}:${String(v)}`;
}

/** Object keys written as `.key` in a leaf's path; others as `["key"]`. */
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** Deepest nesting of arrays/objects walked before an object is guarded on identity. */
const MAX_DEPTH = 8;

const tensorSigs = new WeakMap<Tensor, string>();
/** A tensor's signature, built once per Tensor (its fields and its storage's size never change). */
function tensorSig(t: Tensor): string {
  let sig = tensorSigs.get(t);
  if (sig === undefined) tensorSigs.set(t, (sig = `${t.dtype}@${t.device.name}[${t.shape}](${t.strides})+${t.offset}/${t.storage.nbytes}`));
  return sig;
}

/** `args[i]`, the same string object on every call. */
const topPaths: string[] = [];
function topPath(i: number): string {
  return (topPaths[i] ??= `args[${i}]`);
}

/** Flatten call arguments into guard leaves, in a fixed order. */
export function flattenArgs(args: readonly unknown[]): Leaf[] {
  const leaves: Leaf[] = [];
  const tensorStorages: unknown[] = [];
  const seen = new Set<object>();
  const walk = (v: unknown, path: string, depth: number): void => {
    if (v instanceof Tensor) {
      let alias = tensorStorages.indexOf(v.storage);
      if (alias < 0) alias = tensorStorages.length;
      tensorStorages.push(v.storage);
      leaves.push({ path, tensor: v, alias, sig: tensorSig(v) });
    } else if (v === null || v === undefined || typeof v !== "object" && typeof v !== "function") {
      leaves.push({ path, sig: valueSig(v) });
    } else if (typeof v === "function" || v instanceof Module || depth >= MAX_DEPTH || seen.has(v) || !plain(v)) {
      leaves.push({ path, sig: `#${identity(v)}` });
    } else {
      // The container itself is a leaf (its kind and length or keys, a class instance's class), so
      // an empty one, a missing key or another class is a different call, not a subset of leaves.
      seen.add(v);
      if (Array.isArray(v)) {
        leaves.push({ path, sig: `array(${v.length})` });
        v.forEach((x, i) => walk(x, `${path}[${i}]`, depth + 1));
      } else {
        const keys = Object.keys(v), proto = Object.getPrototypeOf(v) as object | null;
        const kind = proto === Object.prototype || proto === null ? "object" : `#${identity(proto)}`;
        leaves.push({ path, sig: `${kind}{${keys.map((k) => JSON.stringify(k)).join(",")}}` });
        for (const k of keys) walk((v as Record<string, unknown>)[k], IDENTIFIER.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`, depth + 1);
      }
      seen.delete(v);
    }
  };
  args.forEach((a, i) => walk(a, topPath(i), 0));
  return leaves;
}

/** Whether two leaves at the same path guard alike (signature, and for tensors the alias). */
function sameLeaf(a: Leaf, b: Leaf): boolean {
  return a.sig === b.sig && (a.tensor ? b.tensor !== undefined && a.alias === b.alias : b.tensor === undefined);
}

/** Whether two calls' leaves guard alike (then their guardKeys are equal), without building the keys. */
export function sameLeaves(a: readonly Leaf[], b: readonly Leaf[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i].path !== b[i].path || !sameLeaf(a[i], b[i])) return false;
  return true;
}

/**
 * A call's arguments and leaves, kept to match the next call by identity (leavesByIdentity):
 * `storages[i]` is argument i's storage (null for a non-tensor). Made where every argument is a
 * tensor or a primitive (each one leaf), else null. It holds the call's arguments until the next
 * call replaces it, as a compiled graph's leaves hold those of the call that compiled it.
 */
export interface RecentCall {
  args: readonly unknown[];
  leaves: readonly Leaf[];
  storages: (Storage | null)[];
}

/** The RecentCall of a call (`leaves`: its flattened arguments), or null when an argument is a container or an object other than a Tensor. */
export function recentCall(args: readonly unknown[], leaves: readonly Leaf[]): RecentCall | null {
  if (leaves.length !== args.length) return null;
  const storages: (Storage | null)[] = [];
  for (const a of args) {
    if (a instanceof Tensor) storages.push(a.storage);
    else if (a === null || (typeof a !== "object" && typeof a !== "function")) storages.push(null);
    else return null;
  }
  return { args, leaves, storages };
}

/**
 * The leaves of `args` if the call guards as `recent`'s did, decided by identity: every argument
 * is the same value (Object.is) as in `recent`, or a new Tensor of the same signature on a storage
 * that no other argument uses, replacing one whose storage no other argument used (so every alias
 * stays as it was). Else null: the caller flattens the call and checks it as usual. A decode step
 * passes the same KV buffers (56 for the Qwen3-0.6B-shaped model) and a new ids tensor every
 * step; matched this way, the call skips signing and aliasing every argument, ~40 us of JavaScript
 * a token there with the caches cold. On success `recent` becomes this call's (its storages
 * updated in place).
 */
export function leavesByIdentity(recent: RecentCall, args: readonly unknown[]): Leaf[] | null {
  const { args: prev, leaves, storages } = recent, n = args.length;
  if (prev.length !== n) return null;
  let changed: number[] | null = null;
  for (let i = 0; i < n; i++) {
    if (Object.is(args[i], prev[i])) continue;
    const a = args[i], l = leaves[i];
    if (!(a instanceof Tensor) || !l.tensor || tensorSig(a) !== l.sig) return null;
    (changed ??= []).push(i);
  }
  if (!changed) return recent.leaves as Leaf[];
  const next = storages.slice();
  for (const i of changed) {
    const old = next[i], now = (args[i] as Tensor).storage;
    for (let j = 0; j < n; j++) if (j !== i && (next[j] === old || next[j] === now)) return null;
    next[i] = now;
  }
  const out = leaves.slice();
  for (const i of changed) out[i] = { path: leaves[i].path, tensor: args[i] as Tensor, alias: (leaves[i] as TensorLeaf).alias, sig: leaves[i].sig };
  recent.args = args;
  recent.leaves = out;
  recent.storages = next;
  return out;
}

/** Arrays, plain objects and instances of user classes are walked; built-ins (Map, typed arrays,
 * Promise…), devices and storages are not. */
function plain(v: object): boolean {
  if (Array.isArray(v)) return true;
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer || v instanceof Map || v instanceof Set || v instanceof Promise || v instanceof WeakMap) return false;
  const o = v as Record<string, unknown>;
  if (typeof o.allocate === "function" || ("handle" in o && "nbytes" in o)) return false; // a Device or a Storage
  return true;
}

/** The cache key of flattened leaves: path and signature length-prefixed, so no two lists of leaves join alike. */
export function guardKey(leaves: readonly Leaf[]): string {
  let key = "";
  for (const l of leaves) key += `${l.path.length}:${l.path}${l.sig.length}:${l.sig}${l.tensor ? `~${l.alias}` : ""};`;
  return key;
}

/**
 * Why the call `now` fails every kept graph, in words: the failed guard of the graph nearest to it
 * (the fewest differing leaves; the latest compiled among equals), so a recompile names the change
 * that matters (a KV buffer's new capacity) rather than how it differs from an unrelated graph (the
 * decode step, when a prefill recompiles). `kept`: each graph's leaves, oldest first.
 */
export function nearestFailedGuard(kept: readonly (readonly Leaf[])[], now: readonly Leaf[]): string {
  let best: readonly Leaf[] | null = null, fewest = Infinity;
  for (const leaves of kept) {
    const n = differing(leaves, now);
    if (n <= fewest) [best, fewest] = [leaves, n];
  }
  return best ? failedGuard(best, now) : "no graph compiled yet";
}

/** How many leaves differ between two calls (a changed structure counts every leaf). */
function differing(a: readonly Leaf[], b: readonly Leaf[]): number {
  if (a.length !== b.length) return Math.max(a.length, b.length);
  let n = 0;
  for (let i = 0; i < a.length; i++) if (a[i].path !== b[i].path) return a.length;
  else if (!sameLeaf(a[i], b[i])) n++;
  return n;
}

/** Which guard of `before` (an earlier compile's leaves) the call `now` fails, in words. */
export function failedGuard(before: readonly Leaf[], now: readonly Leaf[]): string {
  for (let i = 0; i < Math.max(before.length, now.length); i++) {
    const a = before[i], b = now[i];
    if (!a || !b || a.path !== b.path) return `argument structure changed at ${(b ?? a).path}`;
    if (sameLeaf(a, b)) continue;
    if (a.tensor && b.tensor) return `${b.path}: ${tensorDiff(a, b as TensorLeaf)}`;
    return `${b.path}: expected ${a.tensor ? "a tensor" : a.sig}, got ${b.tensor ? "a tensor" : b.sig}`;
  }
  return "no guard differs (the graph was dropped)";
}

function tensorDiff(a: TensorLeaf, b: TensorLeaf): string {
  const x = a.tensor, y = b.tensor;
  if (x.dtype !== y.dtype) return `dtype mismatch, expected ${x.dtype}, got ${y.dtype}`;
  if (x.device !== y.device) return `device mismatch, expected ${x.device.name}, got ${y.device.name}`;
  if (`${x.shape}` !== `${y.shape}` || x.ndim !== y.ndim) return `shape mismatch, expected [${x.shape}], got [${y.shape}]`;
  if (`${x.strides}` !== `${y.strides}`) return `stride mismatch, expected (${x.strides}), got (${y.strides})`;
  if (x.offset !== y.offset) return `storage offset mismatch, expected ${x.offset}, got ${y.offset}`;
  if (x.storage.nbytes !== y.storage.nbytes) return `storage size mismatch, expected ${x.storage.nbytes} bytes, got ${y.storage.nbytes}`;
  return `aliasing changed (shares storage with tensor argument ${b.alias} instead of ${a.alias})`;
}
