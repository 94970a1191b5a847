/**
 * Checkpoint tensors that a family's Hub files carry but transformers never loads, recognised by
 * name so that loading skips them knowingly instead of reporting them as unexpected.
 */
import { num, type RawConfig } from "./configuration.js";

/**
 * The multi-token-prediction layers that DeepSeek-V3 and GLM-4.5 store after the decoder:
 * `model.layers.{n}.*` … `model.layers.{n + k - 1}.*` for n = num_hidden_layers and
 * k = num_nextn_predict_layers (default 1); transformers' _keys_to_ignore_on_load_unexpected.
 */
export function mtpLayerKeys(raw: RawConfig): RegExp {
  const n = num(raw, "num_hidden_layers"), k = num(raw, "num_nextn_predict_layers", 1);
  const indices = Array.from({ length: Math.max(k, 1) }, (_, i) => n + i).join("|");
  return new RegExp(`^model\\.layers\\.(?:${indices})\\.`);
}
