/**
 * MXFP4 expert weights as gpt-oss Hub files store them (quantization_config.quant_method "mxfp4";
 * transformers' integrations/mxfp4.py): `*_blocks` uint8 [..., nb, 16] (32 e2m1 codes per block,
 * low nibble first) and `*_scales` uint8 [..., nb] (one exponent per block, bias 127). tsorch keeps
 * them packed on the device as int32 words (the form dequantizeMxfp4 takes) and dequantizes there.
 */
import type { RawTensor } from "../hub/index.js";
import { ConfigError, type RawConfig } from "./configuration.js";

/** Whether config.json declares MXFP4 weights; throws naming any other quantization method. */
export function isMxfp4(raw: RawConfig): boolean {
  const q = raw.quantization_config as RawConfig | undefined | null;
  if (!q) return false;
  if (q.quant_method === "mxfp4") return true;
  throw new ConfigError(`config.json quantization_config.quant_method ${JSON.stringify(q.quant_method)} is not supported (supported: mxfp4); load a dequantized checkpoint`);
}

/**
 * A checkpoint's uint8 `*_blocks` [..., nb, 16] or `*_scales` [..., nb] as the int32 words the
 * device keeps: blocks [..., nb, 4] (the same bytes), scales [..., ceil(nb / 4)] (each row's bytes
 * padded with zeros to whole words; the same bytes when nb is a multiple of 4). Other tensors pass
 * through unchanged.
 */
export function mxfp4Words(t: RawTensor): RawTensor {
  if (t.dtype !== "uint8") return t;
  if (t.name.endsWith("_blocks")) {
    const lead = t.shape.slice(0, -1);
    if (t.shape[t.shape.length - 1] !== 16) throw new RangeError(`MXFP4 tensor '${t.name}' has shape [${t.shape}]: blocks must end in 16 bytes`);
    return { ...t, dtype: "int32", shape: [...lead, 4] };
  }
  if (!t.name.endsWith("_scales")) return t;
  const nb = t.shape[t.shape.length - 1], words = Math.ceil(nb / 4), rows = t.bytes.length / Math.max(nb, 1);
  const shape = [...t.shape.slice(0, -1), words];
  if (nb % 4 === 0) return { ...t, dtype: "int32", shape };
  const bytes = new Uint8Array(rows * words * 4);
  for (let r = 0; r < rows; r++) bytes.set(t.bytes.subarray(r * nb, (r + 1) * nb), r * words * 4);
  return { ...t, dtype: "int32", shape, bytes };
}
