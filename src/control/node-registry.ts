/**
 * The node registry: agents from the config and agents that registered
 * themselves, each with the latest poll the health worker reported. A node
 * is Ready while its agent answered within `notReadyAfterMs`; after that it
 * is NotReady until it answers again. Before its first answer it is Unknown,
 * for at most the same time.
 */
import type { NodeConfig } from "../config/types.ts";
import type { AgentSnapshot } from "../protocol/agent-messages.ts";
import type { PolledAgent } from "../protocol/health-messages.ts";
import type { NodeState, RegisteredNode } from "./types.ts";

interface NodeEntry {
  name: string;
  url: string;
  token: string;
  dcgmUrl: string | undefined;
  source: "config" | "registered";
  registeredAt: number | null;
  /** Since when this process watches the node (start, registration or a changed URL). */
  trackedSince: number;
  snapshot: AgentSnapshot | undefined;
}

/** Ready while the last valid answer is at most `notReadyAfterMs` old; Unknown before any answer for that long. */
export function nodeState(entry: Pick<NodeEntry, "snapshot" | "trackedSince">, now: number, notReadyAfterMs: number): NodeState {
  const answeredAt = entry.snapshot?.answeredAt;
  if (answeredAt !== undefined && now - answeredAt <= notReadyAfterMs) return "Ready";
  if (answeredAt === undefined && now - entry.trackedSince <= notReadyAfterMs) return "Unknown";
  return "NotReady";
}

export class NodeRegistry {
  private readonly entries = new Map<string, NodeEntry>();

  constructor(configured: readonly NodeConfig[], registered: readonly RegisteredNode[], now: number) {
    for (const n of configured) {
      this.entries.set(n.name, {
        name: n.name,
        url: n.url,
        token: n.token,
        dcgmUrl: n.dcgmUrl,
        source: "config",
        registeredAt: null,
        trackedSince: now,
        snapshot: undefined,
      });
    }
    for (const r of registered) if (!this.entries.has(r.name)) this.entries.set(r.name, fromRegistration(r, now));
  }

  list(): NodeEntry[] {
    return [...this.entries.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  get(name: string): NodeEntry | undefined {
    return this.entries.get(name);
  }

  isConfigured(name: string): boolean {
    return this.entries.get(name)?.source === "config";
  }

  /** Add or update a self-registered node; true when the poll targets changed (new node, moved agent, new token). */
  register(r: RegisteredNode, now: number): boolean {
    const old = this.entries.get(r.name);
    if (old && old.url === r.url && old.token === r.token && old.dcgmUrl === r.dcgmUrl) return false;
    // A moved agent is a new conversation: its old answers say nothing about the new address.
    this.entries.set(r.name, fromRegistration(r, now));
    return true;
  }

  /** Record a poll; ignored for nodes no longer registered. */
  update(name: string, snapshot: AgentSnapshot): void {
    const e = this.entries.get(name);
    if (e) e.snapshot = snapshot;
  }

  state(name: string, now: number, notReadyAfterMs: number): NodeState | undefined {
    const e = this.entries.get(name);
    return e ? nodeState(e, now, notReadyAfterMs) : undefined;
  }

  /** What the health worker should poll. */
  targets(): PolledAgent[] {
    return this.list().map((e) => ({ node: e.name, url: e.url, token: e.token, dcgmUrl: e.dcgmUrl }));
  }
}

function fromRegistration(r: RegisteredNode, now: number): NodeEntry {
  return {
    name: r.name,
    url: r.url,
    token: r.token,
    dcgmUrl: r.dcgmUrl,
    source: "registered",
    registeredAt: r.registeredAt,
    trackedSince: now,
    snapshot: undefined,
  };
}
