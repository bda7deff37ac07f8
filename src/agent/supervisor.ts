/**
 * Supervises engine processes. Each engine runs in its own process group
 * (Bun.spawn detached: setsid), because engines fork workers that hold GPU
 * memory and outlive a signal sent to the leader alone; stop signals the
 * whole group (SIGTERM, then SIGKILL after a grace period). Output goes to a
 * per-replica log file whose tail is reported. Crashes restart with bounded
 * exponential backoff. Pid files let a restarted agent adopt engines that
 * are still running, but only when /proc shows the same command line,
 * process group and start time: adopting an unrelated process that reused
 * the pid is worse than leaking one.
 */
import { closeSync, mkdirSync } from "node:fs";
import { logger } from "../shared/logger.ts";
import type { LaunchPlan } from "./engine-adapters.ts";
import { engineAuthHeaders, engineKeyEnv } from "./engine-key.ts";
import { type EngineBinding, engineBinding, engineEnv } from "./engine-lifetime.ts";
import { appendLine, capLogFile, DEFAULT_LOG_MAX_BYTES, DEFAULT_TAIL_BYTES, DEFAULT_TAIL_LINES, openLogForAppend, readTail } from "./log-file.ts";
import { logFilePath, readPidFiles, removePidFile, writePidFile } from "./pid-files.ts";
import { isAlive, readStat } from "./proc-info.ts";
import { adoptionRefusal, groupMembers, signalGroup, waitGroupGone } from "./process-group.ts";
import { httpProbe, type Probe } from "./readiness.ts";
import type { ReplicaSpec } from "./replica-spec.ts";
import { DEFAULT_RESTART_POLICY, decideRestart, type ReplicaState, type RestartPolicy, readinessState } from "./replica-state.ts";

const DEFAULT_POLL_MS = 500;
export const DEFAULT_STOP_GRACE_MS = 10_000;

/** What the agent wants running under one replica id. */
export interface DesiredReplica {
  id: string;
  spec: ReplicaSpec;
  fingerprint: string;
  port: number;
  /** URL the control plane reaches the engine at. */
  endpoint: string;
  /** URL the agent probes (loopback when the engine binds every interface). */
  probeUrl: string;
  plan: LaunchPlan;
  /** Where the engine publishes its KV-cache events, as the control plane reaches them; absent: it publishes none. */
  kvEvents?: ReplicaKvEvents;
}

/** A replica's KV-event sockets as reported to the control plane. */
export interface ReplicaKvEvents {
  /** The PUB socket: `tcp://host:port`. */
  endpoint: string;
  /** The replay ROUTER. */
  replayEndpoint: string | null;
  topic: string;
}

export interface ReplicaStatus {
  id: string;
  engine: ReplicaSpec["engine"];
  model: string;
  gpus: number[];
  port: number;
  endpoint: string;
  state: ReplicaState;
  pid: number | null;
  restarts: number;
  adopted: boolean;
  exitCode: number | null;
  exitSignal: string | null;
  message: string | null;
  nextRestartInMs: number | null;
  /** Last lines of stdout+stderr, only when Failed. */
  logTail: string[] | null;
  /** Where the engine publishes KV-cache events; null when it publishes none. */
  kvEvents: ReplicaKvEvents | null;
}

export interface SupervisorOptions {
  stateDir: string;
  probe?: Probe;
  pollMs?: number;
  stopGraceMs?: number;
  restart?: Partial<RestartPolicy>;
  tailLines?: number;
  tailBytes?: number;
  logMaxBytes?: number;
  /** How engines are tied to this agent (default: detached, no prefix). */
  binding?: EngineBinding;
  /** Before a restart: why the replica's port cannot be bound (null: free). No engine is started while it is held. */
  portCheck?: (port: number) => Promise<string | null>;
}

interface Entry {
  desired: DesiredReplica;
  state: ReplicaState;
  pid: number | null;
  pgid: number | null;
  startTime: number | null;
  startedAtMs: number;
  child: Bun.Subprocess | null;
  adopted: boolean;
  restarts: number;
  exitCode: number | null;
  exitSignal: string | null;
  message: string | null;
  nextRestartAt: number | null;
  logTail: string[] | null;
  /** Bumped on every launch and stop; callbacks of an older generation are ignored. */
  generation: number;
  poll: ReturnType<typeof setInterval> | null;
  restartTimer: ReturnType<typeof setTimeout> | null;
  probing: boolean;
}

interface AdoptionReport {
  adopted: string[];
  refused: { id: string; pid: number; reason: string }[];
}

export class Supervisor {
  private readonly entries = new Map<string, Entry>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly probe: Probe;
  private readonly pollMs: number;
  private readonly graceMs: number;
  private readonly policy: RestartPolicy;
  private readonly binding: EngineBinding;

  constructor(private readonly opts: SupervisorOptions) {
    this.binding = opts.binding ?? engineBinding("detached", null, process.pid);
    this.probe = opts.probe ?? httpProbe;
    this.pollMs = opts.pollMs ?? DEFAULT_POLL_MS;
    this.graceMs = opts.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    this.policy = { ...DEFAULT_RESTART_POLICY, ...opts.restart };
    mkdirSync(opts.stateDir, { recursive: true });
  }

  /** Run `fn` after any earlier operation on the same replica id. */
  private serial<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(id) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    this.locks.set(
      id,
      next.catch(() => {}),
    );
    return next;
  }

  /** Make `d` run: nothing when the same spec already runs, a replacement when it changed. */
  apply(d: DesiredReplica): Promise<"created" | "unchanged" | "replaced"> {
    return this.serial(d.id, async () => {
      const existing = this.entries.get(d.id);
      if (existing && existing.desired.fingerprint === d.fingerprint) return "unchanged";
      if (existing) await this.stopEntry(existing);
      const entry = this.newEntry(d);
      this.entries.set(d.id, entry);
      this.launch(entry, true);
      return existing ? "replaced" : "created";
    });
  }

  /** Stop and forget a replica; false when there was none. */
  remove(id: string): Promise<boolean> {
    return this.serial(id, async () => {
      const entry = this.entries.get(id);
      if (!entry) return false;
      await this.stopEntry(entry);
      this.entries.delete(id);
      return true;
    });
  }

  desired(id: string): DesiredReplica | undefined {
    return this.entries.get(id)?.desired;
  }

  list(): ReplicaStatus[] {
    return [...this.entries.values()].map((e) => this.view(e)).sort((a, b) => a.id.localeCompare(b.id));
  }

  status(id: string): ReplicaStatus | undefined {
    const e = this.entries.get(id);
    return e ? this.view(e) : undefined;
  }

  /** Process groups of our live engines: a GPU process in one of them is ours. */
  ownedPgids(): Set<number> {
    return new Set([...this.entries.values()].map((e) => e.pgid).filter((g): g is number => g !== null && g > 0));
  }

  /** Adopt engines left running by a previous agent (see module doc for the checks). */
  async adopt(): Promise<AdoptionReport> {
    const report: AdoptionReport = { adopted: [], refused: [] };
    const { records, unreadable } = readPidFiles(this.opts.stateDir);
    for (const name of unreadable) logger().warn({ file: name }, "unreadable pid file ignored");
    for (const rec of records) {
      if (this.entries.has(rec.id)) continue;
      const reason = adoptionRefusal(rec);
      const entry = this.newEntry({
        id: rec.id,
        spec: rec.spec,
        fingerprint: rec.fingerprint,
        port: rec.port,
        endpoint: rec.endpoint,
        probeUrl: rec.probeUrl,
        plan: { argv: rec.argv, env: rec.env },
        ...(rec.kvEvents ? { kvEvents: rec.kvEvents } : {}),
      });
      entry.restarts = rec.restarts;
      entry.startedAtMs = rec.startedAtMs;
      this.entries.set(rec.id, entry);
      if (reason === null) {
        Object.assign(entry, { pid: rec.pid, pgid: rec.pgid, startTime: rec.startTime, adopted: true, state: "Starting" });
        this.startPolling(entry);
        report.adopted.push(rec.id);
        logger().info({ replica: rec.id, pid: rec.pid }, "adopted running engine");
      } else {
        report.refused.push({ id: rec.id, pid: rec.pid, reason });
        logger().warn({ replica: rec.id, pid: rec.pid, reason }, "engine not adopted");
        removePidFile(this.opts.stateDir, rec.id);
        // Never signal that pid or its group: it is not ours. The replica is treated as crashed.
        this.afterExit(entry, entry.generation, null, null, `not adopted: ${reason}`, false);
      }
    }
    return report;
  }

  /** Stop polling; with stopEngines, stop every engine too (otherwise they keep running for the next agent to adopt). */
  async close(opts: { stopEngines: boolean }): Promise<void> {
    if (opts.stopEngines) {
      await Promise.all([...this.entries.keys()].map((id) => this.remove(id)));
    }
    for (const e of this.entries.values()) this.clearTimers(e);
  }

  private newEntry(d: DesiredReplica): Entry {
    return {
      desired: d,
      state: "Starting",
      pid: null,
      pgid: null,
      startTime: null,
      startedAtMs: Date.now(),
      child: null,
      adopted: false,
      restarts: 0,
      exitCode: null,
      exitSignal: null,
      message: null,
      nextRestartAt: null,
      logTail: null,
      generation: 0,
      poll: null,
      restartTimer: null,
      probing: false,
    };
  }

  private logPath(e: Entry): string {
    return logFilePath(this.opts.stateDir, e.desired.id);
  }

  private launch(e: Entry, freshLog: boolean): void {
    const gen = ++e.generation;
    const { argv, env } = e.desired.plan;
    Object.assign(e, {
      state: "Starting",
      exitCode: null,
      exitSignal: null,
      message: null,
      nextRestartAt: null,
      logTail: null,
      adopted: false,
      startedAtMs: Date.now(),
    });
    let proc: Bun.Subprocess;
    const fd = openLogForAppend(this.logPath(e), freshLog);
    try {
      appendLine(this.logPath(e), `[llmgw agent] starting (restart ${e.restarts}): ${argv.join(" ")}`);
      proc = Bun.spawn([...this.binding.prefix, ...argv], {
        // The key joins the environment here only: the plan (and its pid file) holds the variable's name, never the key.
        env: engineEnv(process.env, this.binding, { ...env, ...engineKeyEnv(e.desired.spec) }),
        stdin: "ignore",
        stdout: fd,
        stderr: fd,
        detached: true,
      });
    } catch (err) {
      this.afterExit(e, gen, null, null, `spawn failed: ${err instanceof Error ? err.message : String(err)}`, false);
      return;
    } finally {
      closeSync(fd);
    }
    Object.assign(e, { child: proc, pid: proc.pid, pgid: proc.pid, startTime: readStat(proc.pid)?.startTime ?? null });
    writePidFile(this.opts.stateDir, {
      version: 1,
      id: e.desired.id,
      pid: proc.pid,
      pgid: proc.pid,
      startTime: e.startTime,
      argv,
      env,
      spec: e.desired.spec,
      fingerprint: e.desired.fingerprint,
      port: e.desired.port,
      endpoint: e.desired.endpoint,
      probeUrl: e.desired.probeUrl,
      startedAtMs: e.startedAtMs,
      restarts: e.restarts,
      ...(e.desired.kvEvents ? { kvEvents: e.desired.kvEvents } : {}),
    });
    logger().info({ replica: e.desired.id, pid: proc.pid, argv }, "engine started");
    void proc.exited.then((code) => this.afterExit(e, gen, code, proc.signalCode === null ? null : String(proc.signalCode), null, true));
    this.startPolling(e);
  }

  private startPolling(e: Entry): void {
    if (e.poll) return;
    e.poll = setInterval(() => void this.pollOnce(e), this.pollMs);
  }

  private async pollOnce(e: Entry): Promise<void> {
    capLogFile(this.logPath(e), this.opts.logMaxBytes ?? DEFAULT_LOG_MAX_BYTES);
    if (e.probing || e.pid === null || !(e.state === "Starting" || e.state === "Loading" || e.state === "Ready")) return;
    const gen = e.generation;
    if (e.child === null && !isAlive(e.pid)) {
      this.afterExit(e, gen, null, null, "adopted engine exited (exit code unknown)", true);
      return;
    }
    e.probing = true;
    try {
      const result = await this.probe(e.desired.probeUrl, e.desired.spec.model, engineAuthHeaders(e.desired.spec));
      // The generation changes on exit, stop and relaunch: a stale probe result is dropped.
      if (gen === e.generation) {
        const next = readinessState(result);
        if (next !== e.state) logger().info({ replica: e.desired.id, from: e.state, to: next }, "replica state");
        e.state = next;
      }
    } finally {
      e.probing = false;
    }
  }

  /** The leader exited (or never started): clean its group, then restart with backoff or stay Failed. */
  private afterExit(e: Entry, gen: number, code: number | null, signal: string | null, message: string | null, killLeftovers: boolean): void {
    if (gen !== e.generation) return;
    e.generation++;
    if (killLeftovers && e.pgid !== null && groupMembers(e.pgid).length > 0) signalGroup(e.pgid, "SIGKILL");
    const decision = decideRestart(this.policy, e.restarts, Date.now() - e.startedAtMs);
    Object.assign(e, { state: "Failed", child: null, pid: null, exitCode: code, exitSignal: signal, restarts: decision.restarts });
    e.logTail = readTail(this.logPath(e), this.opts.tailBytes ?? DEFAULT_TAIL_BYTES, this.opts.tailLines ?? DEFAULT_TAIL_LINES);
    logger().warn({ replica: e.desired.id, exitCode: code, signal, message, restart: decision.restart }, "engine exited");
    if (decision.restart) {
      e.message = message ?? `exited (code ${code ?? "unknown"}${signal ? `, ${signal}` : ""}); restarting`;
      e.nextRestartAt = Date.now() + decision.delayMs;
      e.restartTimer = setTimeout(() => {
        e.restartTimer = null;
        void this.relaunch(e);
      }, decision.delayMs);
    } else {
      e.message = `${message ?? `exited (code ${code ?? "unknown"}${signal ? `, ${signal}` : ""})`}; not restarted after ${e.restarts} restart(s)`;
      removePidFile(this.opts.stateDir, e.desired.id);
    }
  }

  /** A restart, unless the port is held: then no engine is started (it could only fail to bind) and the wait counts as a failed start. */
  private async relaunch(e: Entry): Promise<void> {
    const gen = e.generation;
    const held = this.opts.portCheck ? await this.opts.portCheck(e.desired.port) : null;
    if (gen !== e.generation) return; // stopped or replaced meanwhile
    if (held !== null) this.afterExit(e, gen, null, null, `${held}; engine not started`, false);
    else this.launch(e, false);
  }

  private clearTimers(e: Entry): void {
    if (e.poll) clearInterval(e.poll);
    if (e.restartTimer) clearTimeout(e.restartTimer);
    e.poll = null;
    e.restartTimer = null;
  }

  /** SIGTERM to the whole group, SIGKILL after the grace period; resolves when no member is left. */
  private async stopEntry(e: Entry): Promise<void> {
    e.generation++;
    this.clearTimers(e);
    const pgid = e.pgid;
    if (pgid !== null && e.pid !== null) {
      signalGroup(pgid, "SIGTERM");
      if (!(await waitGroupGone(pgid, e.child, this.graceMs))) {
        logger().warn({ replica: e.desired.id, pgid }, "engine ignored SIGTERM; SIGKILL");
        signalGroup(pgid, "SIGKILL");
        await waitGroupGone(pgid, e.child, 5_000);
      }
    }
    Object.assign(e, { state: "Stopped", pid: null, child: null, nextRestartAt: null });
    removePidFile(this.opts.stateDir, e.desired.id);
  }

  private view(e: Entry): ReplicaStatus {
    const d = e.desired;
    return {
      id: d.id,
      engine: d.spec.engine,
      model: d.spec.model,
      gpus: [...d.spec.gpus],
      port: d.port,
      endpoint: d.endpoint,
      state: e.state,
      pid: e.pid,
      restarts: e.restarts,
      adopted: e.adopted,
      exitCode: e.exitCode,
      exitSignal: e.exitSignal,
      message: e.message,
      nextRestartInMs: e.nextRestartAt === null ? null : Math.max(0, e.nextRestartAt - Date.now()),
      logTail: e.state === "Failed" ? e.logTail : null,
      kvEvents: d.kvEvents ?? null,
    };
  }
}
