/**
 * Polls node agents: GET /v1/state (bearer token) and, for a node with a
 * dcgm-exporter, its /metrics, concurrently and each under a deadline, on the
 * shared TargetPoller. The target list changes at run time (agents register
 * themselves). An answer
 * that is not a valid agent state counts as no answer: the last good state
 * is kept with its time, and the control plane decides when a node that
 * stopped answering is NotReady.
 */
import { assessGpu, type GpuThresholds } from "../gpuhealth/assess.ts";
import { parseDcgmExport } from "../gpuhealth/dcgm.ts";
import { type AgentSnapshot, type AgentState, agentStateSchema, type DcgmVerdicts } from "../protocol/agent-messages.ts";
import type { PolledAgent } from "../protocol/health-messages.ts";
import { dcgmScrapeUrl } from "./dcgm-poller.ts";
import { gpuReport } from "./gpu-reports.ts";
import { type FetchFn, type ProbeResult, probe } from "./probe.ts";
import { isStale } from "./readiness.ts";
import { type PolledTarget, TargetPoller } from "./target-poller.ts";

interface AgentPollerOptions {
  intervalMs: number;
  timeoutMs: number;
  /** DCGM verdicts older than this are stale (no evidence either way). */
  staleAfterMs: number;
  thresholds?: Partial<GpuThresholds>;
  fetch?: FetchFn;
}

type OnAgentSnapshot = (node: string, snapshot: AgentSnapshot) => void;

const INITIAL_AGENT_SNAPSHOT: Readonly<AgentSnapshot> = Object.freeze({
  ok: false,
  state: undefined,
  stateRequestedAt: undefined,
  answeredAt: undefined,
  consecutiveFailures: 0,
  lastError: undefined,
  dcgm: undefined,
});

/** The agent state in a GET /v1/state answer, or why the answer is not one. */
function parseAgentState(res: ProbeResult): { state: AgentState } | { error: string } {
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
export function nextDcgmVerdicts(
  prev: DcgmVerdicts | undefined,
  res: ProbeResult,
  now: number,
  opts: Pick<AgentPollerOptions, "staleAfterMs" | "thresholds">,
): DcgmVerdicts {
  if (!res.ok) {
    const sampledAt = prev?.sampledAt;
    return { ok: false, sampledAt, stale: isStale(sampledAt, now, opts.staleAfterMs), lastError: res.error, gpus: prev?.gpus ?? [] };
  }
  const gpus = parseDcgmExport(res.body).gpus.map((sample) => {
    const assessment = assessGpu(sample, opts.thresholds);
    return { uuid: sample.uuid, index: sample.gpu, reasons: assessment.reasons, report: gpuReport({ sample, assessment }) };
  });
  return { ok: true, sampledAt: now, stale: false, lastError: undefined, gpus };
}

function nextAgentSnapshot(
  prev: Readonly<AgentSnapshot>,
  parsed: { state: AgentState } | { error: string },
  startedAt: number,
  finishedAt: number,
  dcgm: DcgmVerdicts | undefined,
): AgentSnapshot {
  if ("state" in parsed) {
    return { ok: true, state: parsed.state, stateRequestedAt: startedAt, answeredAt: finishedAt, consecutiveFailures: 0, lastError: undefined, dcgm };
  }
  return { ...prev, ok: false, consecutiveFailures: prev.consecutiveFailures + 1, lastError: parsed.error, dcgm };
}

/** One agent as a poller target; `index` is a slot of this poller, renewed when the agent moves. */
interface AgentTarget extends PolledTarget, PolledAgent {}

export class AgentPoller extends TargetPoller<AgentTarget, AgentSnapshot> {
  /** Node name → its target (and slot). */
  private readonly byNode = new Map<string, AgentTarget>();
  private nextIndex = 0;
  private readonly options: AgentPollerOptions;

  constructor(options: AgentPollerOptions, onSnapshot: OnAgentSnapshot) {
    // Slots map back to node names; the map exists before any poll can report.
    const nodeOf = new Map<number, string>();
    super([], options, INITIAL_AGENT_SNAPSHOT, (index, snap) => {
      const node = nodeOf.get(index);
      if (node !== undefined) onSnapshot(node, snap);
    });
    this.nodeOf = nodeOf;
    this.options = { ...options };
  }

  private readonly nodeOf: Map<number, string>;

  /** Replace the agents polled; a node whose URL, token or exporter changed starts afresh (a new slot). */
  setTargets(agents: readonly PolledAgent[]): void {
    const next = new Map(agents.map((a) => [a.node, a]));
    for (const [node, old] of this.byNode) {
      const now = next.get(node);
      if (now && now.url === old.url && now.token === old.token && now.dcgmUrl === old.dcgmUrl) continue;
      this.remove(old.index);
      this.nodeOf.delete(old.index);
      this.byNode.delete(node);
    }
    for (const [node, a] of next) {
      if (this.byNode.has(node)) continue;
      const target: AgentTarget = { ...a, index: this.nextIndex++ };
      this.byNode.set(node, target);
      this.nodeOf.set(target.index, node);
      this.add(target);
    }
  }

  /** The latest poll of a node's agent. */
  snapshotOf(node: string): AgentSnapshot | undefined {
    const t = this.byNode.get(node);
    return t === undefined ? undefined : this.snapshot(t.index);
  }

  protected async pollTarget(target: AgentTarget, prev: Readonly<AgentSnapshot>, signal: AbortSignal): Promise<AgentSnapshot | undefined> {
    const { timeoutMs } = this.options;
    const startedAt = Date.now();
    const [stateRes, dcgmRes] = await Promise.all([
      probe(this.fetchFn, new URL("/v1/state", target.url).toString(), timeoutMs, signal, "GET /v1/state", { authorization: `Bearer ${target.token}` }),
      target.dcgmUrl === undefined ? undefined : probe(this.fetchFn, dcgmScrapeUrl(target.dcgmUrl), timeoutMs, signal, "GET dcgm /metrics"),
    ]);
    if (signal.aborted) return undefined;
    const finishedAt = Date.now();
    const dcgm = dcgmRes === undefined ? undefined : nextDcgmVerdicts(prev.dcgm, dcgmRes, finishedAt, this.options);
    return nextAgentSnapshot(prev, parseAgentState(stateRes), startedAt, finishedAt, dcgm);
  }
}
