/** `llmgw bench` (placeholder until its issue lands). */
import { notBuiltCommand } from "../cli/not-built.ts";

export const benchCommand = notBuiltCommand("bench", "bench", "in progress.");
