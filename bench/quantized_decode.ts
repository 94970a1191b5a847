/**
 * `node dist/bench/quantized_decode.js --model DIR [--threads N] [--tokens N] [--rounds N]`:
 * batch-1 decode tokens/s of one checkpoint loaded as stored (e.g. bfloat16), --dtype int8 and
 * --dtype int4, measured in the same run, interleaved round by round; prints medians, the ratios to
 * the stored dtype and the host's kernel tier. Greedy, a 16-token prompt, no peer.
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { model: { type: "string" }, threads: { type: "string" }, tokens: { type: "string" }, rounds: { type: "string" } } });
if (!values.model) throw new Error("usage: node dist/bench/quantized_decode.js --model DIR [--threads N] [--tokens N] [--rounds N]");
if (values.threads) process.env.TSORCH_NUM_THREADS = values.threads;
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const { printDecodeRounds } = await import("./decode_rounds.js");
const tokens = Number(values.tokens ?? 32), rounds = Number(values.rounds ?? 3);
const dtypes = ["auto", "int8", "int4"] as const;
const models = await Promise.all(dtypes.map((dtype) => AutoModelForCausalLM.fromPretrained(values.model!, { dtype })));
await printDecodeRounds(dtypes.map((d) => (d === "auto" ? models[0].dtype : d)), models, tokens, rounds);
