/** `llmgw agent` (placeholder until its issue lands). */
import { notBuiltCommand } from "../cli/not-built.ts";

export const agentCommand = notBuiltCommand("agent", "agent", "in progress.");
