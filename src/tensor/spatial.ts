/**
 * Image ops of the op front-end (torch.nn.functional): conv2d, groupNorm, interpolate (nearest)
 * and pad (constant). Like tensor/ops.ts, each op validates its inputs, computes the output shape,
 * allocates the output on the inputs' device and calls the registered kernel; activations are
 * computed in float32, weights are read in the dtype they are stored in (float32/16/bf16).
 */
import { getKernel } from "../devices/kernels.js";
import { isFloating, type DType } from "./dtype.js";
import { encode } from "./host.js";
import { checkSameDevice, copyInto, empty } from "./ops.js";
import { numel } from "./shape.js";
import { Tensor } from "./tensor.js";

function f32(x: Tensor): Tensor {
  return x.dtype === "float32" ? x : x.to("float32");
}

/** A number or an [h, w] pair as a pair of integers >= `min`; `what` names it in errors. */
function pair(op: string, what: string, v: number | readonly number[], min: number): [number, number] {
  const p = typeof v === "number" ? [v, v] : [...v];
  if (p.length !== 2 || p.some((x) => !Number.isInteger(x) || x < min)) {
    throw new RangeError(`${op}: ${what} must be an integer >= ${min} or a pair of them, got ${JSON.stringify(v)}`);
  }
  return p as [number, number];
}

export interface Conv2dOptions {
  stride?: number | [number, number];
  padding?: number | [number, number];
  dilation?: number | [number, number];
  groups?: number;
}

/**
 * 2-D convolution (torch.nn.functional.conv2d; cross-correlation with zero padding):
 * x [N, C, H, W] (or unbatched [C, H, W]), weight [O, C / groups, kh, kw] in float32, float16 or
 * bfloat16 (read as stored, like `linear`), bias [O] or null. Returns float32 [N, O, Ho, Wo] with
 * Ho = floor((H + 2 * padding - dilation * (kh - 1) - 1) / stride) + 1 (likewise Wo).
 * Throws RangeError on shapes that do not fit (naming them), a bad stride/padding/dilation/groups,
 * or an output smaller than 1 pixel.
 */
export function conv2d(x: Tensor, weight: Tensor, bias: Tensor | null = null, opts: Conv2dOptions = {}): Tensor {
  const device = checkSameDevice("conv2d", x, weight, bias);
  if (x.ndim === 3) return conv2d(x.unsqueeze(0), weight, bias, opts).squeeze(0);
  const stride = pair("conv2d", "stride", opts.stride ?? 1, 1);
  const padding = pair("conv2d", "padding", opts.padding ?? 0, 0);
  const dilation = pair("conv2d", "dilation", opts.dilation ?? 1, 1);
  const groups = opts.groups ?? 1;
  if (!Number.isInteger(groups) || groups < 1) throw new RangeError(`conv2d: groups must be a positive integer, got ${groups}`);
  if (x.ndim !== 4 || weight.ndim !== 4) {
    throw new RangeError(`conv2d: expected input [N, C, H, W] and weight [O, C / groups, kh, kw], got [${x.shape}] and [${weight.shape}]`);
  }
  if (!isFloating(weight.dtype)) throw new TypeError(`conv2d: weight must be float32, float16 or bfloat16, got ${weight.dtype}`);
  const [N, C, H, W] = x.shape, [O, Cg, kh, kw] = weight.shape;
  if (O % groups !== 0 || Cg * groups !== C) {
    throw new RangeError(`conv2d: input [${x.shape}] with groups=${groups} does not fit weight [${weight.shape}] (expected ${C / groups} input channels per group and out channels divisible by ${groups})`);
  }
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== O)) throw new RangeError(`conv2d: bias [${bias.shape}] does not match weight [${weight.shape}] (expected [${O}])`);
  const Ho = Math.floor((H + 2 * padding[0] - dilation[0] * (kh - 1) - 1) / stride[0]) + 1;
  const Wo = Math.floor((W + 2 * padding[1] - dilation[1] * (kw - 1) - 1) / stride[1]) + 1;
  if (Ho < 1 || Wo < 1) {
    throw new RangeError(`conv2d: input [${x.shape}] padded by [${padding}] is smaller than the kernel ${kh}x${kw} dilated by [${dilation}] (output ${Ho}x${Wo})`);
  }
  const out = empty([N, O, Ho, Wo], "float32", device);
  if (out.numel > 0) {
    getKernel("conv2d", device.type)(f32(x).contiguous(), weight.contiguous(), bias ? bias.contiguous() : null, out, { stride, padding, dilation, groups });
  }
  return out;
}

/**
 * Group normalisation (torch.nn.functional.group_norm): x [N, C, ...] split into `numGroups`
 * groups of C / numGroups channels; each (sample, group) is normalised with its mean and biased
 * variance over the group's channels and positions, then scaled by weight[c] and shifted by
 * bias[c] (either may be null). Weight/bias float32/16/bf16. Returns float32 of x's shape.
 * Throws RangeError when numGroups does not divide C or a parameter is not [C].
 */
export function groupNorm(x: Tensor, numGroups: number, weight: Tensor | null = null, bias: Tensor | null = null, eps = 1e-5): Tensor {
  const device = checkSameDevice("group_norm", x, weight, bias);
  if (x.ndim < 2) throw new RangeError(`group_norm: expected input [N, C, ...], got [${x.shape}]`);
  const [N, C] = x.shape;
  if (!Number.isInteger(numGroups) || numGroups < 1 || C % numGroups !== 0) {
    throw new RangeError(`group_norm: ${numGroups} groups do not divide the ${C} channels of input [${x.shape}]`);
  }
  for (const p of [weight, bias]) {
    if (p && (p.ndim !== 1 || p.shape[0] !== C)) throw new RangeError(`group_norm: parameter [${p.shape}] does not match the ${C} channels of input [${x.shape}]`);
  }
  const out = empty(x.shape, "float32", device);
  if (out.numel > 0) {
    const S = numel(x.shape.slice(2));
    getKernel("groupNorm", device.type)(f32(x).contiguous().view(N, C, S), weight?.contiguous() ?? null, bias?.contiguous() ?? null, out.view(N, C, S), numGroups, eps);
  }
  return out;
}

export interface InterpolateOptions {
  /** Output size = floor(input size * scaleFactor), per spatial dim. */
  scaleFactor?: number | [number, number];
  /** Output [Ho, Wo]. Exactly one of size and scaleFactor. */
  size?: number | [number, number];
  mode: "nearest";
}

/** torch's nearest scale for one dim: 1 and 1/2 when the output is 1x or 2x the input (its special
 * cases), else 1 / scaleFactor or in / out, rounded to float32. */
function nearestScale(inSize: number, outSize: number, factor: number | undefined): number {
  if (outSize === inSize) return 1;
  if (outSize === 2 * inSize) return 0.5;
  return Math.fround(factor !== undefined ? 1 / factor : Math.fround(inSize) / Math.fround(outSize));
}

/**
 * Nearest-neighbour resize of x [N, C, H, W] (torch.nn.functional.interpolate, mode "nearest"):
 * output pixel (h, w) reads input (min(floor(h * s_h), H - 1), min(floor(w * s_w), W - 1)), with
 * s = 1 / scaleFactor (when given) or H / Ho, in float32 as PyTorch's cpu kernel computes it.
 * Returns float32 [N, C, Ho, Wo]. Throws RangeError on a mode other than "nearest", on both or
 * neither of size and scaleFactor, or on an empty output.
 */
export function interpolate(x: Tensor, opts: InterpolateOptions): Tensor {
  if (opts.mode !== "nearest") throw new RangeError(`interpolate: mode '${opts.mode}' is not supported; supported: nearest`);
  if (x.ndim !== 4) throw new RangeError(`interpolate: expected input [N, C, H, W], got [${x.shape}]`);
  if ((opts.size === undefined) === (opts.scaleFactor === undefined)) throw new RangeError("interpolate: give exactly one of size and scaleFactor");
  const [N, C, H, W] = x.shape;
  let factors: [number, number] | undefined;
  let size: [number, number];
  if (opts.scaleFactor !== undefined) {
    const f = opts.scaleFactor;
    factors = typeof f === "number" ? [f, f] : f;
    if (factors.length !== 2 || factors.some((v) => !(v > 0) || !Number.isFinite(v))) throw new RangeError(`interpolate: scaleFactor must be positive, got ${JSON.stringify(f)}`);
    size = [Math.floor(H * factors[0]), Math.floor(W * factors[1])];
  } else {
    size = pair("interpolate", "size", opts.size!, 1);
  }
  const [Ho, Wo] = size;
  if (Ho < 1 || Wo < 1) throw new RangeError(`interpolate: output size ${Ho}x${Wo} of input [${x.shape}] is empty`);
  const out = empty([N, C, Ho, Wo], "float32", x.device);
  if (out.numel > 0 && H * W > 0) {
    getKernel("upsampleNearest2d", x.device.type)(f32(x).contiguous().view(N * C, H, W), out.view(N * C, Ho, Wo),
      nearestScale(H, Ho, factors?.[0]), nearestScale(W, Wo, factors?.[1]));
  }
  return out;
}

/**
 * Constant padding (torch.nn.functional.pad, mode "constant"): `pads` = [left, right] of the last
 * dim, then [top, bottom] of the one before, and so on (at most 2 per dim); negative values crop.
 * The result keeps x's dtype; new elements hold `value`. Throws RangeError on an odd or too long
 * pads list, a non-integer pad, or a negative output size.
 */
export function pad(x: Tensor, pads: readonly number[], value = 0): Tensor {
  if (pads.length % 2 !== 0 || pads.length > 2 * x.ndim || pads.some((p) => !Number.isInteger(p))) {
    throw new RangeError(`pad: pads [${pads}] must be an even number (at most ${2 * x.ndim}) of integers for input [${x.shape}]`);
  }
  const shape = [...x.shape];
  for (let i = 0; i < pads.length / 2; i++) {
    const d = x.ndim - 1 - i;
    shape[d] = x.shape[d] + pads[2 * i] + pads[2 * i + 1];
    if (shape[d] < 0) throw new RangeError(`pad: pads [${pads}] give dim ${d} of input [${x.shape}] the negative size ${shape[d]}`);
  }
  const dtype: DType = x.dtype;
  const fill = new Tensor(x.device.upload(encode([value], dtype)), dtype, []);
  const out = fill.expand(shape).contiguous();
  let src = x, dst = out;
  for (let i = 0; i < pads.length / 2; i++) {
    const d = x.ndim - 1 - i, lo = pads[2 * i], hi = pads[2 * i + 1];
    const len = x.shape[d] - Math.max(0, -lo) - Math.max(0, -hi);
    if (len <= 0) return out;
    src = src.narrow(d, Math.max(0, -lo), len);
    dst = dst.narrow(d, Math.max(0, lo), len);
  }
  if (src.numel > 0) copyInto(src, dst);
  return out;
}
