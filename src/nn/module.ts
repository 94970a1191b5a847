/**
 * Module: a tree of named parameters whose dotted names equal the Hugging Face state_dict keys
 * (e.g. "model.layers.0.self_attn.q_proj.weight"), so a checkpoint loads 1:1 and a missing or
 * unexpected key is reported by name. Parameters are declared with their expected shape and filled
 * by `loadStateDict`.
 */
import type { Device } from "../devices/device.js";
import { openDevice } from "../devices/registry.js";
import type { DType } from "../tensor/dtype.js";
import type { Tensor } from "../tensor/tensor.js";

/**
 * Bumped whenever a parameter's tensor is set or a module's tree changes (a parameter declared or
 * replaced, a child added): compile's guard on parameter identity rereads every parameter only
 * when it moved (walking a 0.6B model's ~310 parameters on every decode step cost more JavaScript
 * time than the rest of the step's guards).
 */
let epoch = 0;

/** The current parameter epoch (see above): unchanged means no module's parameters changed. */
export function parameterEpoch(): number {
  return epoch;
}

/** A named weight slot: expected shape, and the tensor once loaded. */
export class Parameter {
  private tensor: Tensor | null = null;
  /**
   * `dtype`: a fixed dtype the parameter is kept in whatever dtype the model is loaded or moved in
   * (transformers' _keep_in_fp32_modules_strict, e.g. a float32 router bias; or int32 words of
   * packed quantized data); undefined = a weight that follows the model's dtype.
   */
  constructor(readonly shape: readonly number[], readonly dtype?: DType) {}

  /** The loaded tensor; throws when the parameter was never loaded. */
  get value(): Tensor {
    if (!this.tensor) throw new Error(`parameter of shape [${this.shape}] was used before weights were loaded`);
    return this.tensor;
  }
  get loaded(): boolean { return this.tensor !== null; }

  /** Set the tensor; throws on a shape mismatch (the caller adds the parameter's name). */
  set(t: Tensor): void {
    if (t.shape.length !== this.shape.length || t.shape.some((d, i) => d !== this.shape[i])) {
      throw new ShapeMismatchError(`expected shape [${this.shape}], got [${t.shape}]`);
    }
    this.tensor = t;
    epoch++;
  }
}

export class ShapeMismatchError extends Error {}

export class Module {
  private readonly params = new Map<string, Parameter>();
  private readonly children = new Map<string, Module>();

  /** Declare a parameter `name` of `shape` (and a fixed non-floating `dtype`, see Parameter). */
  protected param(name: string, shape: readonly number[], dtype?: DType): Parameter {
    const p = new Parameter(shape, dtype);
    this.params.set(name, p);
    epoch++;
    return p;
  }

  /** Replace parameter `name` by `params` (a layer switching to another weight format before loading). */
  protected replaceParam(name: string, params: Record<string, Parameter>): void {
    this.params.delete(name);
    for (const [n, p] of Object.entries(params)) this.params.set(n, p);
    epoch++;
  }

  /** Register a child module under `name` and return it. */
  protected module<M extends Module>(name: string, m: M): M {
    this.children.set(name, m);
    epoch++;
    return m;
  }

  /** Every parameter with its full dotted name. */
  *namedParameters(prefix = ""): Generator<[string, Parameter]> {
    for (const [n, p] of this.params) yield [prefix + n, p];
    for (const [n, c] of this.children) yield* c.namedParameters(`${prefix}${n}.`);
  }

  /**
   * The tensors of every loaded parameter, in namedParameters' order, each module's followed by
   * its computedWith() tensors, appended to `out` (cheap: no names; compile guards their
   * identity, rereading them when parameterEpoch moved).
   */
  loadedTensors(out: Tensor[] = []): Tensor[] {
    for (const p of this.params.values()) if (p.loaded) out.push(p.value);
    for (const [, t] of this.computedWith()) out.push(t);
    for (const c of this.children.values()) c.loadedTensors(out);
    return out;
  }

  /** The dotted names of loadedTensors(), in its order (for messages). */
  *loadedTensorNames(prefix = ""): Generator<string> {
    for (const [n, p] of this.params) if (p.loaded) yield prefix + n;
    for (const [n] of this.computedWith()) yield prefix + n;
    for (const [n, c] of this.children) yield* c.loadedTensorNames(`${prefix}${n}.`);
  }

  /**
   * Tensors other than its parameters that this module's forward computes with in their place,
   * with names (a Linear's block-quantized weight): none here. A subclass that changes them calls
   * `changed()`, so that compiled functions of the module notice.
   */
  protected computedWith(): [string, Tensor][] {
    return [];
  }

  /** Moves the parameter epoch: this module's computedWith() tensors changed. */
  protected changed(): void {
    epoch++;
  }

  /** This module and every descendant with its dotted name ("" for this one), depth first. */
  *namedModules(prefix = ""): Generator<[string, Module]> {
    yield [prefix.replace(/\.$/, ""), this];
    for (const [n, c] of this.children) yield* c.namedModules(`${prefix}${n}.`);
  }

  /** Loaded tensors by name (torch's state_dict()). */
  stateDict(): Map<string, Tensor> {
    const out = new Map<string, Tensor>();
    for (const [n, p] of this.namedParameters()) if (p.loaded) out.set(n, p.value);
    return out;
  }

  /** Move every parameter to `device` (and optionally cast floating ones to `dtype`). */
  async to(device: string | Device, dtype?: DType): Promise<this> {
    const dev = await openDevice(device);
    for (const [, p] of this.namedParameters()) {
      if (!p.loaded) continue;
      const t = p.value;
      const moved = t.device === dev ? t : await toDevice(t, dev);
      p.set(dtype && !p.dtype && moved.dtype !== dtype && moved.dtype !== "int64" && moved.dtype !== "int32" && moved.dtype !== "bool" ? moved.to(dtype) : moved);
    }
    return this;
  }
}

async function toDevice(t: Tensor, dev: Device): Promise<Tensor> {
  return t.device.readSync ? t.to(dev) : t.toAsync(dev);
}

/** Children named "0", "1", … (torch.nn.ModuleList). */
export class ModuleList<M extends Module> extends Module {
  readonly items: M[];
  constructor(items: M[]) {
    super();
    this.items = items;
    items.forEach((m, i) => this.module(String(i), m));
  }
}
