/** `llmgw bench sim` (placeholder: the sim-engine work fills it in). */
import { UsageError } from "../cli/command.ts";
import type { BenchScenario } from "./command.ts";

export const simScenario: BenchScenario = {
  name: "sim",
  summary: "sim",
  usage: "usage: llmgw bench sim",
  options: {},
  async run() {
    throw new UsageError("not built yet");
  },
};
