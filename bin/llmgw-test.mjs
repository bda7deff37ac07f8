#!/usr/bin/env node
/**
 * `npm test`: the project's Bun test runner with the llmgw environment.
 * The per-test timeout goes on the command line because Bun 1.4 ignores
 * `[test] timeout` in bunfig.toml. Extra arguments pass through
 * (`npm test -- test/unit`).
 */
import { runBun } from "./bun-env.mjs";

const extra = process.argv.slice(2);
runBun(["test", "--timeout", "240000", ...extra]);
