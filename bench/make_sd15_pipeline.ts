/**
 * `node dist/bench/make_sd15_pipeline.js OUT_DIR [--dtype float32|float16]`: a randomly initialised
 * pipeline folder with Stable Diffusion 1.5's shapes (UNet 860M, VAE 84M, CLIP ViT-L/14 text 123M
 * parameters; SD 1.5's config.json values) for measuring speed and memory at real sizes without
 * downloading SD 1.5. ≥2-D weights are drawn uniformly with variance 1/fan_in, norm weights are 1,
 * biases 0. The tokenizer and scheduler are copied from ../shared/fixtures/diffusers/sd_tiny (ids
 * fit any CLIP vocabulary). Write it under /tmp: generated checkpoints are never committed.
 */
import { closeSync, copyFileSync, mkdirSync, openSync, writeFileSync, writeSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { AutoencoderKL, CLIPTextModel, UNet2DConditionModel } from "../src/diffusers/index.js";
import type { Module } from "../src/nn/module.js";

const [out, flag, dtypeArg] = process.argv.slice(2);
if (!out || (flag !== undefined && flag !== "--dtype") || (dtypeArg !== undefined && !["float32", "float16"].includes(dtypeArg))) {
  process.stderr.write("usage: node dist/bench/make_sd15_pipeline.js OUT_DIR [--dtype float32|float16]\n");
  process.exit(2);
}
const half = dtypeArg === "float16";
const SD_TINY = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../shared/fixtures/diffusers/sd_tiny");

const UNET = {
  _class_name: "UNet2DConditionModel", act_fn: "silu", attention_head_dim: 8, block_out_channels: [320, 640, 1280, 1280], center_input_sample: false,
  cross_attention_dim: 768, down_block_types: ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"], downsample_padding: 1,
  flip_sin_to_cos: true, freq_shift: 0, in_channels: 4, layers_per_block: 2, mid_block_scale_factor: 1, norm_eps: 1e-5, norm_num_groups: 32,
  out_channels: 4, sample_size: 64, up_block_types: ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
};
const VAE = {
  _class_name: "AutoencoderKL", act_fn: "silu", block_out_channels: [128, 256, 512, 512], down_block_types: Array(4).fill("DownEncoderBlock2D"),
  in_channels: 3, latent_channels: 4, layers_per_block: 2, norm_num_groups: 32, out_channels: 3, sample_size: 512, scaling_factor: 0.18215,
  up_block_types: Array(4).fill("UpDecoderBlock2D"),
};
const CLIP = {
  architectures: ["CLIPTextModel"], model_type: "clip_text_model", hidden_act: "quick_gelu", hidden_size: 768, intermediate_size: 3072,
  num_attention_heads: 12, num_hidden_layers: 12, max_position_embeddings: 77, vocab_size: 49408, layer_norm_eps: 1e-5, bos_token_id: 0, eos_token_id: 2, pad_token_id: 1,
};

/** Write `model`'s parameters, randomly drawn, as a safetensors file. */
function writeRandom(model: Module, file: string): void {
  const params = [...model.namedParameters()];
  const header: Record<string, unknown> = {};
  let offset = 0;
  const esize = half ? 2 : 4;
  for (const [name, p] of params) {
    const n = p.shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype: half ? "F16" : "F32", shape: p.shape, data_offsets: [offset, offset + n * esize] };
    offset += n * esize;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const fd = openSync(file, "w");
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeSync(fd, len);
  writeSync(fd, Buffer.from(json));
  let seed = 1234;
  const rand = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296) - 0.5;
  for (const [name, p] of params) {
    const n = p.shape.reduce((a, b) => a * b, 1);
    const fanIn = p.shape.slice(1).reduce((a, b) => a * b, 1);
    const amp = Math.sqrt(12 / fanIn);
    const f = new Float32Array(n);
    if (p.shape.length >= 2) for (let i = 0; i < n; i++) f[i] = rand() * amp;
    else if (/norm.*weight$|layer_norm\d?\.weight$/.test(name)) f.fill(1);
    const bytes = half ? new Uint8Array(Float16Bits(f).buffer) : new Uint8Array(f.buffer);
    writeSync(fd, bytes);
  }
  closeSync(fd);
}

/** float32 -> float16 bit patterns (round to nearest, no subnormal care: values are O(1)). */
function Float16Bits(f: Float32Array): Uint16Array {
  const out = new Uint16Array(f.length);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < f.length; i++) {
    const x = u[i], sign = (x >>> 16) & 0x8000, exp = ((x >>> 23) & 0xff) - 127 + 15, mant = x & 0x7fffff;
    out[i] = exp <= 0 ? sign : exp >= 31 ? sign | 0x7c00 : sign | (exp << 10) | ((mant + 0x1000) >>> 13);
  }
  return out;
}

for (const [dir, cfg, file, make] of [
  ["unet", UNET, "diffusion_pytorch_model.safetensors", () => new UNet2DConditionModel(UNET)],
  ["vae", VAE, "diffusion_pytorch_model.safetensors", () => new AutoencoderKL(VAE)],
  ["text_encoder", CLIP, "model.safetensors", () => new CLIPTextModel(CLIP)],
] as const) {
  mkdirSync(path.join(out, dir), { recursive: true });
  writeFileSync(path.join(out, dir, "config.json"), JSON.stringify(cfg, null, 2));
  writeRandom(make(), path.join(out, dir, file));
}
for (const dir of ["tokenizer", "scheduler"]) {
  mkdirSync(path.join(out, dir), { recursive: true });
  for (const f of dir === "tokenizer" ? ["tokenizer.json", "tokenizer_config.json"] : ["scheduler_config.json"]) copyFileSync(path.join(SD_TINY, dir, f), path.join(out, dir, f));
}
copyFileSync(path.join(SD_TINY, "model_index.json"), path.join(out, "model_index.json"));
process.stdout.write(`${out}\n`);
