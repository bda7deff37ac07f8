/** How `llmgw ctl` prints each management API answer for people (scripts use --json). */
import type {
  AutoscaleStatus,
  DrainProgress,
  FailedReplicaStatus,
  ModelStatus,
  NodeStatus,
  PlacementStatus,
  ReplicaStatus,
} from "../control/fleet-api-schemas.ts";
import { type Cell, type CellInput, renderTable } from "../shared/text-table.ts";
import { age, dash } from "./format.ts";

function stateCell(state: string): Cell {
  return { text: state, tint: state === "Ready" ? "green" : state === "NotReady" || state === "Failed" || state === "Lost" ? "red" : "yellow" };
}

function cordonText(n: NodeStatus): string {
  if (n.drain?.state === "running") return "draining";
  if (!n.cordoned) return "-";
  return n.drain?.state === "done" ? "drained" : "cordoned";
}

export function formatNodes(nodes: readonly NodeStatus[], colour: boolean): string {
  if (nodes.length === 0) return "no nodes (list agents under nodes: in the config, or let them register)";
  const table = renderTable(
    ["NODE", "STATE", "SCHEDULING", "GPUS", "FREE", "UNHEALTHY", "REPLICAS", "FABRIC", "LAST ANSWER", "ERROR"],
    nodes.map((n) => [
      n.name,
      stateCell(n.state),
      cordonText(n) === "-" ? { text: "ok", tint: "green" } : { text: cordonText(n), tint: "yellow" },
      n.gpus.length,
      n.gpus.filter((g) => g.healthy && g.used_by === null).length,
      { text: String(n.gpus.filter((g) => !g.healthy).length), ...(n.gpus.some((g) => !g.healthy) ? { tint: "red" as const } : {}) },
      n.replicas.length,
      dash(n.fabric),
      age(n.last_answer_age_ms),
      n.last_error === null ? "-" : { text: n.last_error, tint: "red" },
    ]),
    { colour },
  );
  const out = [table];
  const bad = nodes.flatMap((n) =>
    n.gpus.filter((g) => !g.healthy).flatMap((g) => g.faults.map((f) => [n.name, g.index, g.class, { text: f, tint: "red" as const }] as CellInput[])),
  );
  if (bad.length > 0) out.push("", `GPUs kept out of placement:\n${renderTable(["NODE", "GPU", "CLASS", "REASON"], bad, { colour })}`);
  // Why each node takes no new replicas, as the operator who cordoned it said.
  const cordoned = nodes
    .filter((n) => n.cordoned)
    .map((n) => [n.name, { text: cordonText(n), tint: "yellow" as const }, n.cordon_reason ?? "(no reason given)"] as CellInput[]);
  if (cordoned.length > 0) out.push("", `Cordoned nodes:\n${renderTable(["NODE", "SCHEDULING", "REASON"], cordoned, { colour })}`);
  return out.join("\n");
}

function shardsText(r: ReplicaStatus): string {
  return r.shards.map((s) => `${s.node}:${s.gpus.join(",")}${r.shards.length > 1 ? `(${s.state})` : ""}`).join(" ");
}

function replicaNote(r: ReplicaStatus): string {
  const parts = [r.leaving ? `leaving (${r.leaving.reason})` : null, r.detail, r.last_error ? `agent: ${r.last_error}` : null].filter(
    (p): p is string => p !== null,
  );
  return parts.length === 0 ? "-" : parts.join("; ");
}

export function formatReplicas(replicas: readonly ReplicaStatus[], failed: readonly FailedReplicaStatus[], colour: boolean): string {
  const out: string[] = [];
  out.push(
    replicas.length === 0
      ? "no replicas"
      : renderTable(
          ["REPLICA", "MODEL", "PHASE", "SHARDS", "ROTATION", "INFLIGHT", "DETAIL"],
          replicas.map((r) => [r.id, r.model, stateCell(r.phase), shardsText(r), r.in_rotation ? "in" : "out", dash(r.inflight), replicaNote(r)]),
          { colour },
        ),
  );
  for (const r of replicas) {
    const tail = r.shards.flatMap((s) => (s.log_tail && s.log_tail.length > 0 ? [`--- ${r.id} on ${s.node} (log tail) ---`, ...s.log_tail.slice(-10)] : []));
    if (tail.length > 0) out.push("", ...tail);
  }
  if (failed.length > 0) {
    out.push("", "Recently failed (replaced):");
    out.push(
      renderTable(
        ["REPLICA", "MODEL", "NODES", "AT", "REASON"],
        failed.map((f) => [f.id, f.model, f.nodes.join(","), new Date(f.at).toISOString(), { text: f.reason, tint: "red" }]),
        { colour },
      ),
    );
    for (const f of failed) if (f.log_tail && f.log_tail.length > 0) out.push(`--- ${f.id} (log tail) ---`, ...f.log_tail.slice(-10));
  }
  return out.join("\n");
}

export function formatModels(models: readonly ModelStatus[], colour: boolean): string {
  if (models.length === 0) return "no desired models (fleet.models in the config, or PUT one through the management API)";
  const table = renderTable(
    ["MODEL", "ENGINE", "DESIRED", "ACTIVE", "READY", "SERVING", "LEAVING", "FAILURES", "NEXT ATTEMPT", "ADAPTERS"],
    models.map((m) => [
      m.name,
      m.spec.engine,
      m.spec.autoscaling ? `${m.desired} (${m.pinned ? "pinned" : "auto"})` : m.desired,
      m.active,
      m.ready,
      { text: String(m.serving), tint: m.serving >= m.desired ? "green" : "yellow" },
      m.leaving,
      m.failures === 0 ? "0" : { text: String(m.failures), tint: "red" },
      m.next_attempt_in_ms === null ? "-" : `in ${Math.ceil(m.next_attempt_in_ms / 1000)} s`,
      m.adapters.length === 0 ? "-" : `${m.adapters.filter((a) => a.loaded_on.length > 0).length}/${m.adapters.length} loaded`,
    ]),
    { colour },
  );
  const adapters = models.flatMap((m) => m.adapters.map((a) => ({ model: m.name, ...a })));
  if (adapters.length === 0) return table;
  const list = (ids: readonly string[]) => (ids.length === 0 ? "-" : ids.join(","));
  const rows = adapters.map((a) => [
    a.name,
    a.model,
    a.loaded_on.length === 0 ? { text: "not loaded", tint: "yellow" as const } : list(a.loaded_on),
    list(a.running_on),
    a.waiting_on.length === 0 ? "-" : { text: list(a.waiting_on), tint: "yellow" as const },
    a.last_request_ms_ago === null ? "never" : `${Math.round(a.last_request_ms_ago / 1000)} s ago`,
  ]);
  return [table, "", renderTable(["ADAPTER", "MODEL", "LOADED ON", "RUNNING ON", "QUEUED ON", "LAST REQUEST"], rows, { colour })].join("\n");
}

type PlacementCandidate = PlacementStatus["candidates"][number];
type Shard = PlacementStatus["placements"][number][number];

const shardText = (s: Shard) => `${s.node}:${s.gpus.join(",")}`;

/** One line saying which rule ranked the winner first, with the figures it compared. */
function decisionText(p: PlacementStatus): string | null {
  const d = p.decision;
  if (d === null) return null;
  const find = (s: Shard) => p.candidates.find((c) => c.node === s.node && c.gpus.join() === s.gpus.join())?.score ?? null;
  const [w, r] = [find(d.winner), d.runner_up === null ? null : find(d.runner_up)];
  const head = `ranked first: ${shardText(d.winner)}`;
  if (d.rule === "only-candidate" || d.runner_up === null || w === null || r === null) return `${head}, the only eligible candidate`;
  const over = `over ${shardText(d.runner_up)}`;
  const tie = `spread and pack tie (${w.model_replicas} replica(s) of ${p.model} there, ${w.free_gpus_after} free GPU(s) left)`;
  switch (d.rule) {
    case "spread":
      return `${head} ${over} by spread: ${w.model_replicas} replica(s) of ${p.model} already there against ${r.model_replicas}`;
    case "pack":
      return `${head} ${over} by pack: ${w.free_gpus_after} free GPU(s) left after it against ${r.free_gpus_after}, keeping larger nodes whole`;
    case "node-name":
      return `${head} ${over}: ${tie}; tie-break node-name: the alphabetically first node`;
    case "lowest-gpu":
      return `${head} ${over}: ${tie}; tie-break lowest-gpu: the lowest GPU index on the same node`;
  }
}

export function formatPlacement(p: PlacementStatus, colour: boolean): string {
  const head =
    p.placed === p.requested
      ? `${p.model}: ${p.requested} more replica(s) would go to ${p.placements.map((s) => s.map(shardText).join("+")).join(", ")}`
      : `${p.model}: ${p.placed} of ${p.requested} replica(s) can be placed; ${p.unplaced_reason ?? "no eligible candidate"}`;
  const rows: CellInput[][] = [];
  const scoreCells = (c: PlacementCandidate): CellInput[] => (c.score === null ? ["-", "-"] : [c.score.model_replicas, c.score.free_gpus_after]);
  for (const c of p.candidates) {
    const verdict: Cell =
      c.verdict === "chosen"
        ? { text: `chosen (#${c.rank})`, tint: "green" }
        : c.verdict === "eligible"
          ? { text: `eligible (#${c.rank})`, tint: "yellow" }
          : { text: "rejected", tint: "red" };
    const first = c.reasons[0];
    rows.push([c.node, dash(c.gpus.join(",")), dash(c.gpu_class), verdict, ...scoreCells(c), first ? `${first.code}: ${first.message}` : "-"]);
    for (const r of c.reasons.slice(1)) rows.push(["", "", "", "", "", "", `${r.code}: ${r.message}`]);
  }
  const table = renderTable(["NODE", "GPUS", "CLASS", "VERDICT", "REPLICAS HERE", "FREE AFTER", "REASONS"], rows, { colour });
  const decision = decisionText(p);
  const order = "order: spread (fewest replicas here), pack (fewest free GPUs after), then tie-breaks node-name, lowest-gpu";
  return `${head}\n\n${table}${decision === null ? "" : `\n\n${decision}\n${order}`}`;
}

export function formatDrain(d: DrainProgress): string {
  if (d.state !== "running")
    return `${d.node}: drain ${d.state}${d.finished_at !== null ? ` after ${((d.finished_at - d.started_at) / 1000).toFixed(1)} s` : ""}`;
  const lines = [`${d.node}: draining, ${d.replicas.length} replica(s) left, grace period ${Math.ceil((d.grace_left_ms ?? 0) / 1000)} s left`];
  for (const w of d.waiting_for) lines.push(`  waiting for ${w}`);
  return lines.join("\n");
}

/** The figures of a decision worth a column: what the law read, rounded for people. */
function figuresText(f: Readonly<Record<string, number | null>>): string {
  const parts = Object.entries(f)
    .filter(([, v]) => v !== null)
    .map(([k, v]) => `${k}=${Math.abs(v as number) >= 100 ? Math.round(v as number) : Number((v as number).toPrecision(3))}`);
  return parts.length === 0 ? "-" : parts.join(" ");
}

/** Decisions the table shows per model (--json has every one the gateway keeps). */
const SHOWN_DECISIONS = 20;

export function formatAutoscale(models: readonly AutoscaleStatus[], colour: boolean, now = Date.now()): string {
  if (models.length === 0) return "no autoscaled models (give a model an autoscaling: block in fleet.models)";
  const table = renderTable(
    ["MODEL", "LAW", "BOUNDS", "SLO (TTFT / ITL @ p)", "CURRENT", "READY", "DESIRED", "SET BY", "START-UP", "LAST DECISION"],
    models.map((m) => {
      const last = m.decisions[0];
      return [
        m.model,
        m.policy.law,
        `${m.policy.min_replicas}..${m.policy.max_replicas}`,
        `${m.policy.slo.ttft_ms} ms / ${m.policy.slo.itl_ms} ms @ p${m.policy.slo.percentile}`,
        m.current,
        m.ready,
        m.desired,
        m.pinned ? { text: "operator (pinned)", tint: "yellow" } : m.leader ? "autoscaler" : "autoscaler (on the leader)",
        m.startup_ms === null ? `${Math.round(m.policy.assumed_startup_ms / 1000)} s (assumed)` : `${Math.round(m.startup_ms / 1000)} s`,
        last ? `${last.reason}, ${age(now - Date.parse(last.at))}` : "-",
      ] as CellInput[];
    }),
    { colour },
  );
  const out = [table];
  for (const m of models) {
    if (m.decisions.length === 0) continue;
    const rows = m.decisions
      .slice(0, SHOWN_DECISIONS)
      .map((d) => [
        d.at.slice(11, 19),
        d.current,
        d.asked,
        d.desired === d.current
          ? String(d.desired)
          : { text: `${d.desired} (${d.desired > d.current ? "+" : ""}${d.desired - d.current})`, tint: "yellow" as const },
        d.reason,
        figuresText(d.figures),
      ]);
    out.push("", `${m.model}: last decisions, newest first\n${renderTable(["AT (UTC)", "CURRENT", "ASKED", "DESIRED", "REASON", "INPUTS"], rows, { colour })}`);
  }
  return out.join("\n");
}
