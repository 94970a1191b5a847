/**
 * Diffusers pipeline repositories (model_index.json at the top, one folder per component, as
 * `DiffusionPipeline.save_pretrained` writes them and the Hub hosts them): resolve a folder or a
 * Hub id to a local folder, downloading only what loading needs — model_index.json, each listed
 * component's configs and tokenizer files, and its safetensors weights (the sharded index and its
 * shards, else the single file; fp16/variant files, .bin and .ckpt are not fetched).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { readJsonObject } from "./config.js";
import { downloadRepo, type DownloadOptions } from "./download.js";
import { HubError } from "./errors.js";
import { resolveModel, type RepoKind, type ResolveOptions } from "./resolve.js";
import { readWeightMap } from "./safetensors.js";

/** The file naming a pipeline's class and components. */
export const MODEL_INDEX_FILE = "model_index.json";

/** Weight files of a component, in the order they are looked for (diffusers models, then transformers models). */
export const COMPONENT_WEIGHT_FILES = ["diffusion_pytorch_model.safetensors", "model.safetensors"];

const COMPONENT_FILES = [
  "config.json", "scheduler_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
  "added_tokens.json", "vocab.json", "merges.txt", "spiece.model",
];

/** Component folders model_index.json lists with a class (entries [library, class] not [null, null]). */
export function pipelineComponents(index: Record<string, unknown>): string[] {
  return Object.entries(index).filter(([k, v]) => !k.startsWith("_") && Array.isArray(v) && v[1] !== null).map(([k]) => k);
}

async function download(repoId: string, o: DownloadOptions): Promise<string> {
  return downloadRepo(repoId, o, true, async (entries, fetchFirst, snapshot) => {
    if (!entries.has(MODEL_INDEX_FILE)) throw new HubError(`${repoId} has no ${MODEL_INDEX_FILE} on the Hub (revision ${o.revision}): not a diffusers pipeline`);
    await fetchFirst(MODEL_INDEX_FILE);
    const files = [MODEL_INDEX_FILE];
    for (const comp of pipelineComponents(await readJsonObject(join(snapshot, MODEL_INDEX_FILE)))) {
      files.push(...COMPONENT_FILES.map((f) => `${comp}/${f}`).filter((f) => entries.has(f)));
      for (const w of COMPONENT_WEIGHT_FILES) {
        const index = `${comp}/${w}.index.json`;
        if (entries.has(index)) {
          await fetchFirst(index);
          files.push(index, ...new Set(Object.values(await readWeightMap(join(snapshot, index))).map((s) => `${comp}/${s}`)));
          break;
        }
        if (entries.has(`${comp}/${w}`)) {
          files.push(`${comp}/${w}`);
          break;
        }
      }
    }
    return files.filter((f) => f !== MODEL_INDEX_FILE);
  });
}

/** Whether a cached snapshot holds model_index.json and every listed component's config and weights. */
async function complete(snapshot: string): Promise<boolean> {
  const indexFile = join(snapshot, MODEL_INDEX_FILE);
  if (!existsSync(indexFile)) return false;
  for (const comp of pipelineComponents(await readJsonObject(indexFile))) {
    const dir = join(snapshot, comp);
    if (!existsSync(dir)) return false;
    const weights = COMPONENT_WEIGHT_FILES.some((w) => existsSync(join(dir, w)) || existsSync(join(dir, `${w}.index.json`)));
    const configOnly = existsSync(join(dir, "scheduler_config.json")) || existsSync(join(dir, "tokenizer_config.json"));
    if (!weights && !configOnly) return false;
  }
  return true;
}

const PIPELINE_REPO: RepoKind = { complete, download };

/**
 * The local folder of pipeline `idOrPath`: an existing folder as is, or a Hub id resolved in (and
 * downloaded into) the Hugging Face cache, with resolveModel's options, offline rule and errors.
 * Throws HubError.
 */
export async function resolvePipeline(idOrPath: string, opts: ResolveOptions = {}): Promise<string> {
  return resolveModel(idOrPath, opts, PIPELINE_REPO);
}
