/** `llmgw serve` (placeholder until its issue lands). */
import { notBuiltCommand } from "../cli/not-built.ts";

export const serveCommand = notBuiltCommand("serve", "serve", "in progress.");
