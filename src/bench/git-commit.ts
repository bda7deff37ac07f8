/** The llmgw commit a bench ran at (a report names it beside its date), when it runs from a git checkout. */
import { REPO_ROOT } from "../shared/llmgw-child.ts";

export function gitCommit(): string | undefined {
  const r = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd: REPO_ROOT, stdout: "pipe", stderr: "ignore" });
  return r.exitCode === 0 ? r.stdout.toString().trim() : undefined;
}
