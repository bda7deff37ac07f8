/** `llmgw sim-engine` (placeholder until its issue lands). */
import { notBuiltCommand } from "../cli/not-built.ts";

export const simEngineCommand = notBuiltCommand("sim-engine", "sim-engine", "in progress.");
