/**
 * Qwen3.5 text (hybrid Gated DeltaNet + gated full attention) against Hugging Face transformers'
 * outputs on the tiny random qwen3_5_text fixture: full logits within 1e-4 absolute; greedy ids of
 * single rows and of a left-padded batch (padding must not enter the recurrent state), with
 * dynamic and static caches; and the CLI.
 */
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";

testTinyFixture("qwen3_5_text");
testCliOnFixture("qwen3_5_text");
