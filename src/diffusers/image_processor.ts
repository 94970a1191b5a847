/**
 * The VAE image processor's output side (diffusers' image_processor.py VaeImageProcessor
 * postprocess): decoder output [B, 3, H, W] in about [-1, 1] -> clamp(x / 2 + 0.5, 0, 1), as
 * "np" (a float32 Tensor [B, H, W, 3]) or "pil" (images of round(x · 255) bytes, saved as PNG
 * with pngjs).
 */
import { writeFile } from "node:fs/promises";
import { PNG } from "pngjs";
import { maximum, minimum } from "../tensor/ops.js";
import type { Tensor } from "../tensor/tensor.js";

/** An 8-bit RGB image (what diffusers returns as a PIL.Image). */
export class PipelineImage {
  /** `data`: height · width · 3 bytes, row-major RGB. */
  constructor(readonly width: number, readonly height: number, readonly data: Uint8Array) {
    if (data.length !== width * height * 3) throw new RangeError(`PipelineImage: ${data.length} bytes for ${width}x${height} RGB`);
  }

  /** The image as PNG file bytes (8-bit RGB). */
  toPNG(): Buffer {
    const png = new PNG({ width: this.width, height: this.height, colorType: 2, inputColorType: 2, inputHasAlpha: false });
    png.data = Buffer.from(this.data.buffer, this.data.byteOffset, this.data.byteLength);
    return PNG.sync.write(png, { colorType: 2, inputColorType: 2, inputHasAlpha: false });
  }

  /** Write the image as a PNG file to `path`. */
  async save(path: string): Promise<void> {
    await writeFile(path, this.toPNG());
  }
}

/** clamp(x / 2 + 0.5, 0, 1) permuted to [B, H, W, 3] (VaeImageProcessor.denormalize + pt_to_numpy). float32. */
export function denormalizeToNHWC(image: Tensor): Tensor {
  if (image.ndim !== 4) throw new RangeError(`image postprocess: expected a decoder output [B, C, H, W], got [${image.shape}]`);
  return minimum(maximum(image.mul(0.5).add(0.5), 0), 1).permute(0, 2, 3, 1).contiguous();
}

/** Images [B, H, W, 3] in [0, 1] -> 8-bit images, round(x · 255) half to even (numpy_to_pil). */
export async function numpyToPil(images: Tensor): Promise<PipelineImage[]> {
  const [B, H, W, C] = images.shape;
  if (images.ndim !== 4 || C !== 3) throw new RangeError(`numpyToPil: expected [B, H, W, 3], got [${images.shape}]`);
  const values = await images.data();
  const out: PipelineImage[] = [];
  for (let b = 0; b < B; b++) {
    const bytes = new Uint8Array(H * W * 3);
    const base = b * H * W * 3;
    for (let i = 0; i < bytes.length; i++) bytes[i] = roundHalfEvenByte(Number(values[base + i]) * 255);
    out.push(new PipelineImage(W, H, bytes));
  }
  return out;
}

function roundHalfEvenByte(x: number): number {
  const r = Math.round(x);
  const v = Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
  return v < 0 ? 0 : v > 255 ? 255 : v;
}
