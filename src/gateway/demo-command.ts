/** `llmgw demo` (placeholder until its issue lands). */
import { notBuiltCommand } from "../cli/not-built.ts";

export const demoCommand = notBuiltCommand("demo", "demo", "in progress.");
