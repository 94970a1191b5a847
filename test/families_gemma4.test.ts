/**
 * Gemma 4 in its Hub layout (Gemma4ForConditionalGeneration: text config under `text_config`,
 * language-model weights under `model.language_model.*`, vision/audio towers skipped) against
 * transformers' outputs on the tiny gemma4 (per-layer inputs, KV sharing, double-wide MLP,
 * proportional rope) and gemma4_moe (dense MLP + experts per layer, keys = values on full layers)
 * fixtures: full logits within 1e-4; greedy ids alone and left-padded, dynamic and static cache;
 * the CLI.
 */
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";

for (const arch of ["gemma4", "gemma4_moe"]) {
  testTinyFixture(arch);
  testCliOnFixture(arch);
}
