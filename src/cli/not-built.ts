/** A command whose capability is not built yet says so plainly and exits 3. */
import type { CommandSpec } from "./command.ts";

export const EXIT_NOT_BUILT = 3;

export function notBuiltCommand(name: string, summary: string, what: string): CommandSpec {
  return {
    name,
    summary,
    usage: `usage: llmgw ${name} [flags]\n\n${summary}\n\nNot built yet: ${what}`,
    options: {},
    allowPositionals: true,
    async run() {
      console.error(`llmgw ${name}: not built yet: ${what}`);
      return EXIT_NOT_BUILT;
    },
  };
}
