/**
 * The second batch of decoder families against Hugging Face transformers' outputs on their tiny
 * fixtures (../shared/fixtures/tiny, notes in FAMILIES2.md): full logits within 1e-4 absolute;
 * greedy ids of single rows and of a left-padded batch, with dynamic and static caches; and the
 * CLI (`tsorch forward`, `tsorch generate --output json`).
 */
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";

for (const arch of ["smollm3", "glm4_moe", "deepseek_v3", "gpt_oss"]) {
  testTinyFixture(arch);
  testCliOnFixture(arch);
}
