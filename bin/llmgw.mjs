#!/usr/bin/env node
/** The `llmgw` command: the project's pinned Bun running src/cli.ts with the llmgw environment. */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { runBun } from "./bun-env.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
runBun([join(root, "src", "cli.ts"), ...process.argv.slice(2)]);
