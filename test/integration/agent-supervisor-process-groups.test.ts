/**
 * Scenario: the agent's supervisor over real processes. Stopping an engine
 * leaves no survivor of its process group (a double-forked grandchild
 * included); a crash is Failed with its log tail; crashes restart with
 * backoff up to a bound; a new supervisor over the same state directory
 * adopts a running engine and refuses a pid whose command line differs.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pidFilePath, writePidFile } from "../../src/agent/pid-files.ts";
import { cmdlineMatches, groupMembers, isAlive, readCmdline, readStat } from "../../src/agent/proc-info.ts";
import { replicaSpecSchema, specFingerprint } from "../../src/agent/replica-spec.ts";
import { type DesiredReplica, Supervisor, type SupervisorOptions } from "../../src/agent/supervisor.ts";
import { waitUntil } from "../helpers/processes.ts";

/**
 * Right after spawn the child may not have exec'd yet, and /proc/<pid>/cmdline
 * still shows the parent's command line; adoption (rightly) refuses such a
 * pid, so wait for the exec before restarting the agent.
 */
async function execDone(pid: number, argv: string[]): Promise<void> {
  await waitUntil(() => cmdlineMatches(argv, readCmdline(pid) ?? []), { what: `pid ${pid} exec'd`, timeoutMs: 5_000, intervalMs: 5 });
}

const tmp = mkdtempSync(join(tmpdir(), "agent-sup-"));
const supervisors: Supervisor[] = [];
const strays: number[] = [];

afterAll(async () => {
  await Promise.all(supervisors.map((s) => s.close({ stopEngines: true })));
  for (const pid of strays) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

const neverUp = async () => ({ healthy: false, modelListed: false });

function supervisor(stateDir: string, opts: Partial<SupervisorOptions> = {}): Supervisor {
  const s = new Supervisor({ stateDir, probe: neverUp, pollMs: 50, stopGraceMs: 2_000, restart: { maxRestarts: 0 }, ...opts });
  supervisors.push(s);
  return s;
}

function desired(id: string, argv: string[], model = "m"): DesiredReplica {
  const spec = replicaSpecSchema.parse({ engine: "sim", model, extraArgs: argv });
  return { id, spec, fingerprint: specFingerprint(spec), port: 1, endpoint: "http://127.0.0.1:1", probeUrl: "http://127.0.0.1:1", plan: { argv, env: {} } };
}

describe("supervisor over real processes", () => {
  test("stop kills the whole process group: the double-forked grandchild does not survive", async () => {
    const sup = supervisor(join(tmp, "tree"));
    // `(sleep 1000 &)` forks a grandchild whose parent exits at once: it is reparented away from the leader.
    expect(await sup.apply(desired("tree", ["sh", "-c", "(sleep 1000 &) ; sleep 1000; exit 0"]))).toBe("created");
    const pid = sup.status("tree")!.pid!;
    const members = (await waitUntil(() => (groupMembers(pid).length >= 3 ? groupMembers(pid) : null), { what: "leader, child and grandchild" })) ?? [];
    const grandchild = members.find((p) => p !== pid && readStat(p)?.state !== "Z" && readFileSync(`/proc/${p}/stat`, "utf8").split(" ")[3] !== String(pid));
    expect(grandchild).toBeDefined(); // a member whose parent is not the leader
    expect(await sup.remove("tree")).toBe(true);
    expect(groupMembers(pid)).toEqual([]);
    for (const p of members) expect(isAlive(p)).toBe(false);
  });

  test("an engine that ignores SIGTERM is SIGKILLed after the grace period", async () => {
    const sup = supervisor(join(tmp, "stubborn"), { stopGraceMs: 300 });
    await sup.apply(desired("stubborn", ["sh", "-c", "trap '' TERM; (trap '' TERM; sleep 1000) & sleep 1000; exit 0"]));
    const pid = sup.status("stubborn")!.pid!;
    await waitUntil(() => groupMembers(pid).length >= 2, { what: "engine and worker" });
    const t0 = Date.now();
    await sup.remove("stubborn");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(groupMembers(pid)).toEqual([]);
  });

  test("a crash is Failed with its exit code and the tail of stdout+stderr", async () => {
    const sup = supervisor(join(tmp, "crash"));
    await sup.apply(desired("crash", ["sh", "-c", "echo loading weights; echo 'CUDA error: out of memory' >&2; exit 3"]));
    const st = await waitUntil(() => (sup.status("crash")?.state === "Failed" ? sup.status("crash") : null), { what: "Failed" });
    expect(st?.exitCode).toBe(3);
    expect(st?.pid).toBeNull();
    expect(st?.logTail).toContain("loading weights");
    expect(st?.logTail).toContain("CUDA error: out of memory");
    expect(st?.message).toContain("not restarted");
  });

  test("crash loops restart with backoff, then stay Failed", async () => {
    const sup = supervisor(join(tmp, "loop"), { restart: { maxRestarts: 2, baseDelayMs: 100, maxDelayMs: 1_000 } });
    const t0 = Date.now();
    await sup.apply(desired("loop", ["sh", "-c", "echo run; exit 1"]));
    const st = await waitUntil(
      () => {
        const s = sup.status("loop");
        return s?.state === "Failed" && s.restarts === 2 && s.nextRestartInMs === null ? s : null;
      },
      { what: "gave up" },
    );
    // two restarts after 100 ms and 200 ms
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(st?.logTail?.filter((l) => l === "run")).toHaveLength(3);
    await Bun.sleep(400);
    expect(sup.status("loop")?.restarts).toBe(2);
  });

  test("an identical apply is a no-op; a changed spec replaces the process", async () => {
    const sup = supervisor(join(tmp, "idem"));
    const d = desired("idem", ["sh", "-c", "sleep 1000; exit 0"]);
    await sup.apply(d);
    const pid = sup.status("idem")!.pid;
    expect(await sup.apply({ ...d })).toBe("unchanged");
    expect(sup.status("idem")!.pid).toBe(pid);
    expect(await sup.apply(desired("idem", ["sh", "-c", "sleep 999; exit 0"]))).toBe("replaced");
    expect(sup.status("idem")!.pid).not.toBe(pid);
    expect(isAlive(pid!)).toBe(false);
    await sup.remove("idem");
  });

  test("a restarted agent adopts its running engine, and refuses a pid whose command line differs", async () => {
    const dir = join(tmp, "adopt");
    const first = supervisor(dir);
    await first.apply(desired("keep", ["sh", "-c", "sleep 1000; exit 0"]));
    const pid = first.status("keep")!.pid!;
    await execDone(pid, ["sh", "-c", "sleep 1000; exit 0"]);
    await first.close({ stopEngines: false }); // the agent goes away; the engine keeps running
    expect(isAlive(pid)).toBe(true);

    // A pid file whose process is some other program now (pid reuse).
    const unrelated = Bun.spawn(["sleep", "1000"], { stdio: ["ignore", "ignore", "ignore"], detached: true });
    strays.push(unrelated.pid);
    // Until it has exec'd, /proc shows the spawning child (or nothing) and adoption would call it gone.
    await execDone(unrelated.pid, ["sleep", "1000"]);
    const fake = desired("ghost", ["sh", "-c", "my-engine --port 9; exit 0"]);
    writePidFile(dir, {
      version: 1,
      id: "ghost",
      pid: unrelated.pid,
      pgid: unrelated.pid,
      startTime: readStat(unrelated.pid)?.startTime ?? null,
      argv: fake.plan.argv,
      env: {},
      spec: fake.spec,
      fingerprint: fake.fingerprint,
      port: 9,
      endpoint: fake.endpoint,
      probeUrl: fake.probeUrl,
      startedAtMs: Date.now(),
      restarts: 0,
    });

    const second = supervisor(dir);
    const report = await second.adopt();
    expect(report.adopted).toEqual(["keep"]);
    expect(report.refused).toEqual([{ id: "ghost", pid: unrelated.pid, reason: `pid ${unrelated.pid} runs another command line` }]);
    expect(second.status("keep")).toMatchObject({ pid, adopted: true, state: "Starting" });
    expect(second.status("ghost")).toMatchObject({ pid: null, state: "Failed", adopted: false });
    await Bun.sleep(200);
    expect(isAlive(unrelated.pid)).toBe(true); // never signalled
    expect(() => readFileSync(pidFilePath(dir, "ghost"))).toThrow();

    // The adopted engine is really ours: removing it stops its group.
    await second.remove("keep");
    expect(isAlive(pid)).toBe(false);
  });

  test("an adopted engine that dies is noticed (exit code unknown)", async () => {
    const dir = join(tmp, "adopt-dies");
    const first = supervisor(dir);
    await first.apply(desired("short", ["sh", "-c", "sleep 1000; exit 0"]));
    const pid = first.status("short")!.pid!;
    await execDone(pid, ["sh", "-c", "sleep 1000; exit 0"]);
    await first.close({ stopEngines: false });
    const second = supervisor(dir);
    expect((await second.adopt()).adopted).toEqual(["short"]);
    process.kill(-pid, "SIGKILL");
    const st = await waitUntil(() => (second.status("short")?.state === "Failed" ? second.status("short") : null), { what: "Failed" });
    expect(st?.exitCode).toBeNull();
    expect(st?.message).toContain("adopted engine exited");
  });
});
