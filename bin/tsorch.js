#!/usr/bin/env node
// The `tsorch` command: the compiled CLI (src/cli/main.ts), built by `npm install`.
import "../dist/src/cli/main.js";
