/**
 * Polls node agents: GET /v1/state (bearer token) and, for a node with a
 * dcgm-exporter, its /metrics, concurrently and each under a deadline. The
 * target list changes at run time (agents register themselves). An answer
 * that is not a valid agent state counts as no answer: the last good state
 * is kept with its time, and the control plane decides when a node that
 * stopped answering is NotReady.
 */
import { assessGpu, type GpuThresholds } from "../gpuhealth/assess.ts";
import { parseDcgmExport } from "../gpuhealth/dcgm.ts";
import { agentStateSchema, type AgentSnapshot, type AgentState, type DcgmVerdicts } from "../protocol/agent-messages.ts";
import type { PolledAgent } from "../protocol/health-messages.ts";
import { dcgmScrapeUrl } from "./dcgm-poller.ts";
import { PollLoop } from "./poll-loop.ts";
import { probe, type FetchFn, type ProbeResult } from "./probe.ts";
import { isStale } from "./readiness.ts";

export interface AgentPollerOptions {
  intervalMs: number;
  timeoutMs: number;
  /** DCGM verdicts older than this are stale (no evidence either way). */
  staleAfterMs: number;
  thresholds?: Partial<GpuThresholds>;
  fetch?: FetchFn;
}

export type OnAgentSnapshot = (node: string, snapshot: AgentSnapshot) => void;

export const INITIAL_AGENT_SNAPSHOT: Readonly<AgentSnapshot> = Object.freeze({
  ok: false,
  state: undefined,
  stateRequestedAt: undefined,
  answeredAt: undefined,
  consecutiveFailures: 0,
  lastError: undefined,
  dcgm: undefined,
});

/** The agent state in a GET /v1/state answer, or why the answer is not one. */
export function parseAgentState(res: ProbeResult): { state: AgentState } | { error: string } {
  if (!res.ok) return { error: res.error };
  let json: unknown;
  try {
    json = JSON.parse(res.body);
  } catch {
    return { error: "GET /v1/state: the answer is not JSON" };
  }
  const parsed = agentStateSchema.safeParse(json);
  if (parsed.success) return { state: parsed.data };
  const issue = parsed.error.issues[0];
  return { error: `GET /v1/state: not an agent state (${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"})` };
}

/** DCGM verdicts after one scrape; the previous GPUs are kept (and age) when it fails. */
export function nextDcgmVerdicts(prev: DcgmVerdicts | undefined, res: ProbeResult, now: number, opts: Pick<AgentPollerOptions, "staleAfterMs" | "thresholds">): DcgmVerdicts {
  if (!res.ok) {
    const sampledAt = prev?.sampledAt;
    return { ok: false, sampledAt, stale: isStale(sampledAt, now, opts.staleAfterMs), lastError: res.error, gpus: prev?.gpus ?? [] };
  }
  const gpus = parseDcgmExport(res.body).gpus.map((sample) => ({ uuid: sample.uuid, index: sample.gpu, reasons: assessGpu(sample, opts.thresholds).reasons }));
  return { ok: true, sampledAt: now, stale: false, lastError: undefined, gpus };
}

export function nextAgentSnapshot(prev: Readonly<AgentSnapshot>, parsed: { state: AgentState } | { error: string }, startedAt: number, finishedAt: number, dcgm: DcgmVerdicts | undefined): AgentSnapshot {
  if ("state" in parsed) {
    return { ok: true, state: parsed.state, stateRequestedAt: startedAt, answeredAt: finishedAt, consecutiveFailures: 0, lastError: undefined, dcgm };
  }
  return { ...prev, ok: false, consecutiveFailures: prev.consecutiveFailures + 1, lastError: parsed.error, dcgm };
}

export class AgentPoller {
  private readonly targets = new Map<string, PolledAgent>();
  private readonly snapshots = new Map<string, AgentSnapshot>();
  private readonly loop: PollLoop<string>;
  private readonly fetchFn: FetchFn;

  constructor(
    private readonly options: AgentPollerOptions,
    private readonly onSnapshot: OnAgentSnapshot,
  ) {
    if (!(options.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${options.timeoutMs}`);
    this.fetchFn = options.fetch ?? ((url, init) => fetch(url, init));
    this.loop = new PollLoop(() => [...this.targets.keys()], options.intervalMs, (node, signal) => this.poll(node, signal));
  }

  /** Replace the agents polled; a node whose URL or token changed starts afresh. */
  setTargets(agents: readonly PolledAgent[]): void {
    const next = new Map(agents.map((a) => [a.node, a]));
    for (const [node, old] of this.targets) {
      const now = next.get(node);
      if (!now || now.url !== old.url || now.token !== old.token || now.dcgmUrl !== old.dcgmUrl) this.snapshots.delete(node);
    }
    this.targets.clear();
    for (const [node, a] of next) this.targets.set(node, a);
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Poll every agent once; resolves after every onSnapshot of this round. */
  pollOnce(): Promise<void> {
    return this.loop.pollOnce();
  }

  snapshot(node: string): AgentSnapshot | undefined {
    return this.snapshots.get(node);
  }

  private async poll(node: string, signal: AbortSignal): Promise<void> {
    const target = this.targets.get(node);
    if (!target) return;
    const { timeoutMs } = this.options;
    const startedAt = Date.now();
    const [stateRes, dcgmRes] = await Promise.all([
      probe(this.fetchFn, new URL("/v1/state", target.url).toString(), timeoutMs, signal, "GET /v1/state", { authorization: `Bearer ${target.token}` }),
      target.dcgmUrl === undefined ? undefined : probe(this.fetchFn, dcgmScrapeUrl(target.dcgmUrl), timeoutMs, signal, "GET dcgm /metrics"),
    ]);
    // Stopped, or the target was replaced while this poll ran: its answer says nothing about the new one.
    if (signal.aborted || this.targets.get(node) !== target) return;
    const finishedAt = Date.now();
    const prev = this.snapshots.get(node) ?? INITIAL_AGENT_SNAPSHOT;
    const dcgm = dcgmRes === undefined ? undefined : nextDcgmVerdicts(prev.dcgm, dcgmRes, finishedAt, this.options);
    const next = nextAgentSnapshot(prev, parseAgentState(stateRes), startedAt, finishedAt, dcgm);
    this.snapshots.set(node, next);
    this.onSnapshot(node, next);
  }
}
