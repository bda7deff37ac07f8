/** The contract of one `llmgw bench <scenario>` (in its own module, so scenarios and the dispatcher import no cycle). */
import type { CommandSpec, ParsedArgs } from "../shared/flags.ts";

export interface BenchScenario {
  name: string;
  summary: string;
  /** Flags of this scenario, shown by `llmgw bench <name> --help`. */
  usage: string;
  options: CommandSpec["options"];
  run(args: ParsedArgs): Promise<number>;
}
