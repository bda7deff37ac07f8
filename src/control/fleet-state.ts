/** The fleet manager's memory: registry, desired models, cordons, drains, replica records with what the shell knows of each, backoffs and failures. */
import type { NodeRegistry } from "./node-registry.ts";
import type { PhaseVerdict, ReplicaRuntime } from "./replica-phase.ts";
import type { Cordon, DrainOp, ReplicaRecord, StoredModel } from "./types.ts";

/** Failed replicas kept (with their log tails) for `ctl replicas`. */
export const FAILED_HISTORY_LIMIT = 20;

interface RuntimeState extends ReplicaRuntime {
  launchedAt: Record<string, number>;
  handedOff: boolean;
  drainingSignalled: boolean;
  launchFailures: number;
  /** The last agent call error about this replica. */
  lastError: string | null;
}

export interface ReplicaEntry {
  record: ReplicaRecord;
  runtime: RuntimeState;
  verdict: PhaseVerdict;
}

/** A replica given up on, kept for `ctl replicas` with its log tail. */
interface FailedReplica {
  id: string;
  model: string;
  nodes: string[];
  at: number;
  reason: string;
  logTail: string[] | null;
}

/** Per node: the last error of a call to its agent (polls report theirs in the snapshot). */
interface NodeCallError {
  at: number;
  message: string;
}

export class FleetState {
  readonly models = new Map<string, StoredModel>();
  readonly cordons = new Map<string, Cordon>();
  readonly drains = new Map<string, DrainOp>();
  readonly replicas = new Map<string, ReplicaEntry>();
  /** Per model: consecutive failures, when the last one was, and no new replica before `until`. */
  readonly backoff = new Map<string, { failures: number; lastFailureAt: number; until: number }>();
  readonly failed: FailedReplica[] = [];
  readonly nodeErrors = new Map<string, NodeCallError>();

  constructor(
    readonly registry: NodeRegistry,
    readonly startedAt: number,
  ) {}

  /** Track a record (loaded or new); the Ready timeout counts from `now`. */
  adoptRecord(record: ReplicaRecord, now: number): ReplicaEntry {
    const entry: ReplicaEntry = {
      record,
      runtime: {
        launchedAt: {},
        failure: null,
        trackedSince: now,
        busy: false,
        handedOff: false,
        drainingSignalled: false,
        launchFailures: 0,
        lastError: null,
      },
      verdict: { phase: "Pending", detail: null, shards: [] },
    };
    this.replicas.set(record.id, entry);
    return entry;
  }
}
