/** `llmgw bench overhead` (placeholder: the sim-engine work fills it in). */
import { UsageError } from "../cli/command.ts";
import type { BenchScenario } from "./command.ts";

export const overheadScenario: BenchScenario = {
  name: "overhead",
  summary: "overhead",
  usage: "usage: llmgw bench overhead",
  options: {},
  async run() {
    throw new UsageError("not built yet");
  },
};
