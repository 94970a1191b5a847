/**
 * Qwen3.5 and Qwen3.5-MoE in their Hub layouts (Qwen3_5ForConditionalGeneration,
 * Qwen3_5MoeForConditionalGeneration: text config under `text_config`, language-model weights
 * under `model.language_model.*`, a vision tower that is skipped) against transformers' outputs on
 * the tiny qwen3_5 and qwen3_5_moe fixtures: full logits within 1e-4; greedy ids alone and
 * left-padded, dynamic and static cache; the CLI.
 */
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";

for (const arch of ["qwen3_5", "qwen3_5_moe"]) {
  testTinyFixture(arch);
  testCliOnFixture(arch);
}
