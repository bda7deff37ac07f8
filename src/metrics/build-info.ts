/** llmgw_build_info: which llmgw a scrape came from (version, git commit, Bun), so a dashboard can tell replicas of a rolling upgrade apart. */
import { join } from "node:path";
import { Gauge, type Registry } from "prom-client";
import pkg from "../../package.json" with { type: "json" };
import { M } from "./names.ts";

const REPO_ROOT = join(import.meta.dir, "..", "..");

/** The commit label when neither LLMGW_COMMIT nor git can say (an unpacked tarball, an image built without the variable). */
const UNKNOWN_COMMIT = "unknown";

let commit: string | undefined;

/**
 * The commit llmgw runs at: LLMGW_COMMIT when set (an image has no .git; its
 * build passes the commit in), else `git rev-parse` of the checkout it runs
 * from, else "unknown". Asked once per process: a spawn is not for every
 * registry a test builds.
 */
function buildCommit(): string {
  if (commit !== undefined) return commit;
  const fromEnv = process.env.LLMGW_COMMIT?.trim();
  if (fromEnv) return (commit = fromEnv.slice(0, 40));
  try {
    const r = Bun.spawnSync(["git", "rev-parse", "--short=12", "HEAD"], { cwd: REPO_ROOT, stdout: "pipe", stderr: "ignore" });
    const out = r.exitCode === 0 ? r.stdout.toString().trim() : "";
    commit = /^[0-9a-f]{4,40}$/.test(out) ? out : UNKNOWN_COMMIT;
  } catch {
    // No git binary on this host.
    commit = UNKNOWN_COMMIT;
  }
  return commit;
}

/** Register llmgw_build_info{version, commit, bun} = 1 on `registry`. */
export function registerBuildInfo(registry: Registry): void {
  const g = new Gauge<"version" | "commit" | "bun">({ name: M.buildInfo.name, help: M.buildInfo.help, labelNames: M.buildInfo.labels, registers: [registry] });
  g.set({ version: pkg.version, commit: buildCommit(), bun: Bun.version }, 1);
}
