import { afterAll, describe, expect, test } from "bun:test";
import { appendFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tokenMatches } from "../../src/agent/agent-server.ts";
import { capLogFile, readTail } from "../../src/agent/log-file.ts";
import { cmdlineMatches, parseProcStat, readCmdline, readStat } from "../../src/agent/proc-info.ts";
import { decideRestart, modelsListModel, readinessState } from "../../src/agent/replica-state.ts";

const tmp = mkdtempSync(join(tmpdir(), "agent-core-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("readiness is two questions", () => {
  test("/health says up, /v1/models listing the model says loaded", () => {
    expect(readinessState({ healthy: false, modelListed: false })).toBe("Starting");
    expect(readinessState({ healthy: true, modelListed: false })).toBe("Loading");
    expect(readinessState({ healthy: true, modelListed: true })).toBe("Ready");
  });

  test("model listing by id (or vLLM's root)", () => {
    expect(modelsListModel({ object: "list", data: [{ id: "a" }, { id: "m" }] }, "m")).toBe(true);
    expect(modelsListModel({ data: [{ id: "served-name", root: "/models/m" }] }, "/models/m")).toBe(true);
    expect(modelsListModel({ data: [] }, "m")).toBe(false);
    expect(modelsListModel({ error: "loading" }, "m")).toBe(false);
    expect(modelsListModel(null, "m")).toBe(false);
  });
});

describe("restart backoff", () => {
  const policy = { maxRestarts: 3, baseDelayMs: 100, maxDelayMs: 250, resetAfterMs: 10_000 };
  test("doubles, is capped, and gives up after maxRestarts", () => {
    expect(decideRestart(policy, 0, 5)).toEqual({ restart: true, delayMs: 100, restarts: 1 });
    expect(decideRestart(policy, 1, 5)).toEqual({ restart: true, delayMs: 200, restarts: 2 });
    expect(decideRestart(policy, 2, 5)).toEqual({ restart: true, delayMs: 250, restarts: 3 });
    expect(decideRestart(policy, 3, 5)).toEqual({ restart: false, restarts: 3 });
  });
  test("a long run resets the count", () => {
    expect(decideRestart(policy, 3, 20_000)).toEqual({ restart: true, delayMs: 100, restarts: 1 });
  });
});

describe("/proc fingerprints", () => {
  test("stat with spaces and parentheses in the command name", () => {
    const st = parseProcStat("1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0");
    expect(st).toEqual({ pid: 1234, state: "S", ppid: 1, pgid: 1234, startTime: 98765 });
  });

  test("our own process reads back", () => {
    expect(readStat(process.pid)?.pid).toBe(process.pid);
    expect(readCmdline(process.pid)?.length).toBeGreaterThan(0);
    expect(readStat(2 ** 22 + 12345)).toBeUndefined();
  });

  test("command lines match exactly, or as a #! script re-exec'd by its interpreter", () => {
    const argv = ["vllm", "serve", "m", "--port", "8000"];
    expect(cmdlineMatches(argv, argv)).toBe(true);
    expect(cmdlineMatches(argv, ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m", "--port", "8000"])).toBe(true);
    expect(cmdlineMatches(argv, ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m", "--port", "8001"])).toBe(false);
    expect(cmdlineMatches(argv, ["/usr/bin/python3", "/usr/local/bin/other", "serve", "m", "--port", "8000"])).toBe(false);
    expect(cmdlineMatches(["sh", "-c", "sleep 1000; exit 0"], ["sleep", "1000"])).toBe(false);
  });
});

describe("log tail", () => {
  test("last N lines, bounded by bytes; a cut line fragment is dropped", () => {
    const path = join(tmp, "a.log");
    writeFileSync(path, Array.from({ length: 100 }, (_, i) => `line ${i}`).join("\n") + "\n");
    expect(readTail(path, 16_384, 3)).toEqual(["line 97", "line 98", "line 99"]);
    expect(readTail(path, 20, 10)).toEqual(["line 98", "line 99"]);
    expect(readTail(join(tmp, "missing.log"))).toEqual([]);
  });

  test("a log over its cap is cut back to its tail", () => {
    const path = join(tmp, "big.log");
    writeFileSync(path, "x".repeat(10_000) + "\n");
    appendFileSync(path, "last words\n");
    capLogFile(path, 5_000, 100);
    expect(statSync(path).size).toBeLessThan(200);
    expect(readTail(path)).toContain("last words");
  });
});

describe("bearer token", () => {
  test("exact token only", () => {
    expect(tokenMatches("Bearer s3cret", "s3cret")).toBe(true);
    expect(tokenMatches("bearer s3cret", "s3cret")).toBe(true);
    expect(tokenMatches("Bearer s3cret2", "s3cret")).toBe(false);
    expect(tokenMatches("s3cret", "s3cret")).toBe(false);
    expect(tokenMatches(null, "s3cret")).toBe(false);
  });
});
