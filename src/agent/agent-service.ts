/**
 * The agent's operations behind its HTTP API: inventory (cached briefly, one
 * nvidia-smi run at a time), node state, and replica PUT/DELETE with
 * validation, port assignment and idempotency. Mutations run one at a time so
 * two PUTs cannot both claim the same GPU.
 */
import { createServer } from "node:net";
import { LlmgwError } from "../shared/errors.ts";
import { buildLaunchPlan, type EngineBinaries, type KvEventsPorts } from "./engine-adapters.ts";
import { collectInventory, type Inventory } from "./inventory.ts";
import { readStat } from "./proc-info.ts";
import { type AdapterOutcome, loadAdapter, unloadAdapter } from "./replica-adapters.ts";
import { publishesKvEvents, REPLICA_ID_RE, type ReplicaSpec, replicaSpecSchema, specFingerprint } from "./replica-spec.ts";
import type { ReplicaKvEvents, ReplicaStatus, Supervisor } from "./supervisor.ts";
import { type OtherReplica, validateReplica } from "./validation.ts";

const INVENTORY_TTL_MS = 1_000;

interface AgentServiceOptions {
  nvidiaSmi: string;
  sysfsRoot: string;
  /** Interface engines bind. */
  engineHost: string;
  /** Host name or address put in endpoint URLs for the control plane. */
  advertiseHost: string;
  bins: EngineBinaries;
  supervisor: Supervisor;
  /** Why `port` cannot be bound on the engine host (null: free); absent: not checked. */
  portCheck?: (port: number) => Promise<string | null>;
}

interface NodeState {
  node: string;
  gpus: Inventory["gpus"];
  fabric: Inventory["fabric"];
  replicas: ReplicaStatus[];
}

/** A free TCP port on `host`, chosen by the kernel (port 0), skipping ports our replicas hold. */
export async function freePort(host: string, avoid: ReadonlySet<number>): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = createServer();
      srv.once("error", reject);
      srv.listen(0, host, () => {
        const addr = srv.address();
        const p = typeof addr === "object" && addr ? addr.port : 0;
        srv.close(() => resolve(p));
      });
    });
    if (port > 0 && !avoid.has(port)) return port;
  }
  throw new LlmgwError("INTERNAL_ERROR", "no free port found");
}

/** The ports a replica's KV-event sockets hold (from their reported addresses). */
function kvEventPorts(kv: ReplicaKvEvents | null): number[] {
  if (kv === null) return [];
  return [kv.endpoint, kv.replayEndpoint].flatMap((e) => {
    const m = e === null ? null : /:(\d+)$/.exec(e);
    return m ? [Number(m[1])] : [];
  });
}

function urlHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

export class AgentService {
  private cache: { at: number; inv: Promise<Inventory> } | null = null;
  private mutex: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: AgentServiceOptions) {}

  private isOurs = (pid: number): boolean => {
    const pgid = readStat(pid)?.pgid;
    return pgid !== undefined && this.opts.supervisor.ownedPgids().has(pgid);
  };

  inventory(maxAgeMs = INVENTORY_TTL_MS): Promise<Inventory> {
    const now = Date.now();
    if (this.cache && now - this.cache.at <= maxAgeMs) return this.cache.inv;
    const inv = collectInventory({ nvidiaSmi: this.opts.nvidiaSmi, sysfsRoot: this.opts.sysfsRoot, isOurs: this.isOurs });
    this.cache = { at: now, inv };
    inv.catch(() => (this.cache = null));
    return inv;
  }

  async state(): Promise<NodeState> {
    const inv = await this.inventory();
    return { node: inv.node, gpus: inv.gpus, fabric: inv.fabric, replicas: this.opts.supervisor.list() };
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.mutex.then(fn, fn);
    this.mutex = next.catch(() => {});
    return next;
  }

  /** Validate and apply a desired spec. `created` tells a new replica from an update or a no-op. */
  putReplica(id: string, body: unknown): Promise<{ outcome: "created" | "unchanged" | "replaced"; replica: ReplicaStatus }> {
    checkId(id);
    const parsed = replicaSpecSchema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const path = issue?.path.join(".") ?? "";
      throw new LlmgwError("VALIDATION_FAILED", `spec: ${path ? `${path}: ` : ""}${issue?.message ?? "invalid"}`, { param: path || null });
    }
    const spec = parsed.data;
    return this.exclusive(async () => {
      const sup = this.opts.supervisor;
      const fingerprint = specFingerprint(spec);
      const current = sup.desired(id);
      if (current?.fingerprint === fingerprint) return { outcome: "unchanged" as const, replica: this.status(id) };
      const running = sup.list().filter((r) => r.id !== id && r.state !== "Stopped");
      const others: OtherReplica[] = running.map((r) => ({ id: r.id, gpus: r.gpus, port: r.port }));
      const inv = await this.inventory(0);
      const fabric = validateReplica(spec, { gpus: inv.gpus, fabric: inv.fabric, others });
      if (spec.port !== undefined) await this.checkPortFree(id, spec.port);
      // Every port our replicas hold, their KV-event sockets included, is off limits for a new one.
      const taken = new Set(others.map((o) => o.port).filter((p): p is number => p !== null));
      for (const r of running) for (const p of kvEventPorts(r.kvEvents)) taken.add(p);
      const port = spec.port ?? (await freePort(this.opts.engineHost, taken));
      taken.add(port);
      const kv = await this.allocateKvEvents(id, spec, taken);
      const plan = buildLaunchPlan({ spec, port, host: this.opts.engineHost, fabric, bins: this.opts.bins, ...(kv ? { kvEvents: kv.ports } : {}) });
      const outcome = await sup.apply({
        id,
        spec,
        fingerprint,
        port,
        endpoint: `http://${urlHost(this.opts.advertiseHost)}:${port}`,
        probeUrl: `http://${urlHost(probeHost(this.opts.engineHost))}:${port}`,
        plan,
        ...(kv ? { kvEvents: kv.report } : {}),
      });
      return { outcome, replica: this.status(id) };
    });
  }

  /**
   * Two free ports for the engine's KV-event PUB and replay sockets, and
   * their addresses as the control plane reaches them (the engine binds them
   * on every interface: vLLM binds only a wildcard endpoint). The topic
   * names the replica and its model, as llm-d's `kv@pod@model`.
   */
  private async allocateKvEvents(id: string, spec: ReplicaSpec, taken: Set<number>): Promise<{ ports: KvEventsPorts; report: ReplicaKvEvents } | undefined> {
    if (!publishesKvEvents(spec)) return undefined;
    // The engine binds them on every interface (tcp://*:port): they must be free there.
    const host = "0.0.0.0";
    const port = await freePort(host, taken);
    taken.add(port);
    const replayPort = await freePort(host, taken);
    taken.add(replayPort);
    const topic = `kv@${id}@${spec.model}`;
    const advertised = urlHost(this.opts.advertiseHost);
    return {
      ports: { port, replayPort, topic },
      report: { endpoint: `tcp://${advertised}:${port}`, replayEndpoint: `tcp://${advertised}:${replayPort}`, topic },
    };
  }

  /** Refuse a port another process holds (the engine could only crash-loop on it); the replica's own running engine may hold it. */
  private async checkPortFree(id: string, port: number): Promise<void> {
    const own = this.opts.supervisor.status(id);
    if (own && own.port === port && own.pid !== null) return;
    const held = (await this.opts.portCheck?.(port)) ?? null;
    if (held !== null) throw new LlmgwError("VALIDATION_FAILED", `port-in-use: ${held}`, { param: "port" });
  }

  deleteReplica(id: string): Promise<boolean> {
    checkId(id);
    return this.exclusive(() => this.opts.supervisor.remove(id));
  }

  /** Load a LoRA adapter into a running replica through its engine (vLLM's runtime route). */
  loadAdapter(id: string, name: string, body: unknown): Promise<AdapterOutcome> {
    checkId(id);
    return loadAdapter(this.opts.supervisor.desired(id), id, name, body);
  }

  unloadAdapter(id: string, name: string): Promise<AdapterOutcome> {
    checkId(id);
    return unloadAdapter(this.opts.supervisor.desired(id), id, name);
  }

  status(id: string): ReplicaStatus {
    const s = this.opts.supervisor.status(id);
    if (!s) throw new LlmgwError("NOT_FOUND", `no replica '${id}' on this node`);
    return s;
  }
}

/** An engine bound to every interface is probed over loopback. */
function probeHost(engineHost: string): string {
  if (engineHost === "0.0.0.0" || engineHost === "") return "127.0.0.1";
  if (engineHost === "::") return "::1";
  return engineHost;
}

function checkId(id: string): void {
  if (!REPLICA_ID_RE.test(id)) throw new LlmgwError("VALIDATION_FAILED", `replica id '${id}' must match ${REPLICA_ID_RE.source}`, { param: "id" });
}
