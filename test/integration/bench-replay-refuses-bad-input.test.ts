/** `llmgw bench replay` with bad input: a clear message naming the flag (or the trace's line) and exit 2, before or instead of a run. */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT } from "../helpers/processes.ts";

async function replay(args: string[]): Promise<{ code: number; stderr: string }> {
  const proc = Bun.spawn([process.execPath, CLI, "bench", "replay", ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  return { code, stderr: stderr.split("\n")[0]! };
}

test("no trace, an unknown one, a malformed file, an empty window, a flag the sim-engine refuses, a gateway config the gateway refuses", async () => {
  const dir = mkdtempSync(join(tmpdir(), "replay-bad-"));
  const bad = join(dir, "bad.jsonl");
  writeFileSync(bad, '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1]}\n');
  const config = join(dir, "llmgw.yaml");
  writeFileSync(config, "admission:\n  enabled: maybe\n");
  try {
    const cases: [string[], string][] = [
      [[], "--trace is required"],
      [["--trace", "azure-everything"], "'azure-everything' is neither a shipped trace"],
      [["--trace", bad], "line 1: hash_ids: 1 ids for input_length 600; expected 2"],
      [["--trace", "mooncake-synthetic", "--start", "5000"], "no requests in mooncake-synthetic between 5000 s and 5300 s"],
      [["--trace", "azure-code", "--speedup", "0"], "--speedup: expected a number"],
      [["--trace", "azure-code", "--duration", "1", "--engine-args=--no-such-flag 1"], "sim-engine refused its flags"],
      [
        ["--trace", "azure-code", "--duration", "1", "--gateway-config", config],
        "the gateway refused its config: admission.enabled: Invalid input: expected boolean",
      ],
    ];
    for (const [args, message] of cases) {
      const r = await replay(args);
      expect({ args, code: r.code, said: r.stderr.includes(message) ? message : r.stderr }).toEqual({ args, code: 2, said: message });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
