/**
 * `node dist/bench/hub_quant_decode.js --model DIR [--model DIR ...] [--threads N] [--tokens N] [--rounds N]`:
 * batch-1 decode tokens/s of several checkpoints (e.g. a bfloat16 model and GPTQ / AWQ / FP8 packings
 * of it, see test/helpers/hub_quant_pack.ts), loaded as stored and measured in the same run,
 * interleaved round by round; prints medians, the ratio to the first model and the kernel tier.
 * Greedy, a 16-token prompt, no peer.
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { model: { type: "string", multiple: true }, threads: { type: "string" }, tokens: { type: "string" }, rounds: { type: "string" } } });
if (!values.model?.length) throw new Error("usage: node dist/bench/hub_quant_decode.js --model DIR [--model DIR ...] [--threads N] [--tokens N] [--rounds N]");
if (values.threads) process.env.TSORCH_NUM_THREADS = values.threads;
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const { printDecodeRounds } = await import("./decode_rounds.js");
const tokens = Number(values.tokens ?? 32), rounds = Number(values.rounds ?? 3);
const dirs = values.model;
const models = await Promise.all(dirs.map((dir) => AutoModelForCausalLM.fromPretrained(dir)));
await printDecodeRounds(dirs, models, tokens, rounds);
