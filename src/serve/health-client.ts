/**
 * The main thread's side of the health worker: starts it over the shared
 * endpoint table, tells it which endpoints to poll as they come and go, and
 * turns what it reports by message (model lists, readiness changes) into
 * catalog updates and log lines. Everything else it learns lands in the
 * shared table directly.
 */

import type { AgentSnapshot } from "../protocol/agent-messages.ts";
import type { GpuReportMessage } from "../protocol/gpu-report.ts";
import type { AgentPollSettings, FromHealth, ListedAdapter, PolledAgent, PolledEndpoint, ToHealth } from "../protocol/health-messages.ts";
import type { Logger } from "../shared/logger.ts";

const WORKER_URL = new URL("../../workers/health.ts", import.meta.url);

export interface HealthEvents {
  /** An endpoint's /v1/models listed these models and LoRA adapters (first discovery, or a change). */
  models(index: number, models: string[], adapters: ListedAdapter[]): void;
  /** The health worker numbered these adapter names (the LoRA table's ids). */
  adapterIds?(names: [string, number][]): void;
  /** The endpoint's readiness changed. */
  readiness(index: number, ready: boolean, healthy: boolean, error: string | undefined): void;
  /** Every endpoint present at start has been polled once (once; at start when there are none). */
  enginesPolled(): void;
  /** A DCGM exporter answered: its GPUs. */
  gpus(report: GpuReportMessage): void;
  /** A node agent was polled (fleet manager: FleetManager.onAgentSnapshot). */
  agent?(node: string, snapshot: AgentSnapshot): void;
}

export class HealthClient {
  private readonly worker: Worker;
  private readonly ready: Promise<void>;
  private stopped: Promise<void> | undefined;
  private onStopped: (() => void) | undefined;

  constructor(init: Omit<Extract<ToHealth, { type: "init" }>, "type">, events: HealthEvents, log: Logger) {
    this.worker = new Worker(WORKER_URL.href);
    let markReady: () => void = () => {};
    this.ready = new Promise((r) => (markReady = r));
    this.worker.onmessage = (event: MessageEvent<FromHealth>) => {
      const msg = event.data;
      switch (msg.type) {
        case "ready":
          // The first "ready" answers init; the second answers stop.
          if (this.onStopped) this.onStopped();
          else markReady();
          return;
        case "models":
          events.models(msg.index, msg.models, msg.adapters);
          return;
        case "adapter-ids":
          events.adapterIds?.(msg.names);
          return;
        case "readiness":
          events.readiness(msg.index, msg.ready, msg.healthy, msg.error);
          return;
        case "engines-polled":
          events.enginesPolled();
          return;
        case "gpus":
          events.gpus(msg);
          return;
        case "agent":
          events.agent?.(msg.node, msg.snapshot);
          return;
        default: {
          const unreachable: never = msg;
          log.error({ msg: unreachable }, "unknown health message");
        }
      }
    };
    this.post({ type: "init", ...init });
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  private post(msg: ToHealth): void {
    this.worker.postMessage(msg);
  }

  /** Poll the endpoint of a slot from now on (undefined: stop polling it). */
  pollEndpoint(index: number, e: PolledEndpoint | undefined): void {
    this.post({ type: "endpoint", index, endpoint: e ?? null });
  }

  /** Poll these node agents from now on, replacing the previous list (fleet manager: its pollAgents option). */
  pollAgents(agents: PolledAgent[], settings: AgentPollSettings): void {
    this.post({ type: "agents", agents, settings });
  }

  /** Stop polling (bounded), then end the worker. */
  stop(timeoutMs = 1_000): Promise<void> {
    this.stopped ??= (async () => {
      const done = new Promise<void>((r) => (this.onStopped = r));
      this.post({ type: "stop" });
      await Promise.race([done, Bun.sleep(timeoutMs)]);
      this.worker.terminate();
    })();
    return this.stopped;
  }
}
