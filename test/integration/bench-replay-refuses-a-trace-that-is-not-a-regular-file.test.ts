/**
 * Scenario: `llmgw bench replay --trace` given /dev/zero (which grew the
 * bench without bound), a FIFO no one writes (which blocked it forever), a
 * link to one, a directory, or a trace past MAX_TRACE_FILE_BYTES; the same
 * for `--gateway-config`, and a `bench routing --policy-dir` holding a
 * policy file that links to a FIFO. Each exits 2 at once with one line
 * naming the flag and what the path is; nothing is read past the cap.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_TRACE_FILE_BYTES } from "../../src/bench/input-file.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT } from "../helpers/processes.ts";

/** Far beyond a refusal's time even on a loaded host; a blocked or growing bench is killed here and fails the test. */
const GIVE_UP_MS = 60_000;

const dir = mkdtempSync(join(tmpdir(), "bench-not-a-file-"));
const fifo = join(dir, "trace.fifo");
const fifoLink = join(dir, "link-to-fifo.jsonl");
const oversized = join(dir, "huge.jsonl");
const policies = join(dir, "policies");

beforeAll(() => {
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  symlinkSync(fifo, fifoLink);
  // Sparse: one byte past the cap costs no disk.
  const fd = openSync(oversized, "w");
  closeSync(fd);
  Bun.spawnSync(["truncate", "-s", String(MAX_TRACE_FILE_BYTES + 1), oversized]);
  mkdirSync(policies);
  writeFileSync(join(policies, "fine.yaml"), "description: default scheduling\n");
  symlinkSync(fifo, join(policies, "stuck.yaml"));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function bench(args: string[]): Promise<{ code: number | string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, CLI, "bench", ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
    stdout: "ignore",
    stderr: "pipe",
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, GIVE_UP_MS);
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code: timedOut ? "still running after 60 s" : code, stderr: stderr.trim() };
}

test(
  "a trace or gateway config that is not a regular file, or is too large, exits 2 with one line",
  async () => {
    const cases: [string[], string][] = [
      [["replay", "--trace", "/dev/zero"], "--trace: /dev/zero is a character device; expected a regular file"],
      [["replay", "--trace", fifo], `--trace: ${fifo} is a FIFO; expected a regular file`],
      [["replay", "--trace", fifoLink], `--trace: ${fifoLink} is a FIFO; expected a regular file`],
      [["replay", "--trace", dir], `--trace: ${dir} is a directory; expected a regular file`],
      [["replay", "--trace", oversized], `--trace: ${oversized} is ${MAX_TRACE_FILE_BYTES + 1} bytes; at most ${MAX_TRACE_FILE_BYTES} are read`],
      [
        ["replay", "--trace", "azure-code", "--duration", "1", "--gateway-config", "/dev/zero"],
        "--gateway-config: /dev/zero is a character device; expected a regular file",
      ],
      [
        ["replay", "--trace", "azure-code", "--duration", "1", "--gateway-config", fifoLink],
        `--gateway-config: ${fifoLink} is a FIFO; expected a regular file`,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await bench(args);
      // One line: the flag was right, so no usage text follows.
      expect({ args, code: r.code, said: r.stderr.slice(0, 500) }).toEqual({ args, code: 2, said: `llmgw bench: ${message}` });
    }
  },
  8 * GIVE_UP_MS,
);

test(
  "a routing policy file that links to a FIFO exits 2 with one line",
  async () => {
    const r = await bench(["routing", "--policy-dir", policies, "--pods", "1", "--rates", "1", "--stage-s", "1"]);
    const message = `routing policy: ${join(policies, "stuck.yaml")} is a FIFO; expected a regular file`;
    expect({ code: r.code, said: r.stderr.slice(0, 500) }).toEqual({ code: 2, said: `llmgw bench: ${message}` });
  },
  2 * GIVE_UP_MS,
);
