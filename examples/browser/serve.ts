/** `npm run demo -- [--port P]`: serve the browser demo at http://127.0.0.1:P/ (default 8080) until interrupted. */
import { parseArgs } from "node:util";
import { startDemo } from "./server.js";

const { values } = parseArgs({ options: { port: { type: "string", default: "8080" } } });
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port must be an integer in [0, 65535], got ${JSON.stringify(values.port)}`);
  process.exit(2);
}
const demo = await startDemo(port);
console.log(`tsorch demo: ${demo.url} (WebGPU browser needed; Ctrl-C stops)`);
