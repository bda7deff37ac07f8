/**
 * The main thread's side of the scheduler worker: sends schedule requests by
 * postMessage and resolves each with its grant (endpoint row) or rejection.
 */
import type { Config } from "../config/types.ts";
import type { EndpointDescriptor, FromScheduler, GrantDetail, ToScheduler } from "../protocol/scheduler-messages.ts";
import { LlmgwError } from "../shared/errors.ts";

export interface Grant extends GrantDetail {
  index: number;
}

type Pending = { resolve: (g: Grant) => void; reject: (e: LlmgwError) => void; onDrops: (d: Record<string, number>) => void };

const WORKER_URL = new URL("../../workers/scheduler.ts", import.meta.url);

export class SchedulerClient {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly ready: Promise<void>;

  constructor(buffer: SharedArrayBuffer, endpoints: EndpointDescriptor[], scheduling: Config["scheduling"], staleAfterMs: number) {
    this.worker = new Worker(WORKER_URL.href);
    let markReady: () => void = () => {};
    this.ready = new Promise((r) => (markReady = r));
    this.worker.onmessage = (event: MessageEvent<FromScheduler>) => {
      const msg = event.data;
      switch (msg.type) {
        case "ready":
          markReady();
          return;
        case "grant": {
          const p = this.take(msg.id);
          p?.onDrops(msg.drops);
          p?.resolve({ index: msg.index, scores: msg.scores, drops: msg.drops });
          return;
        }
        case "reject": {
          const p = this.take(msg.id);
          p?.onDrops(msg.drops);
          p?.reject(new LlmgwError(msg.error.code, msg.error.message));
          return;
        }
        default: {
          const unreachable: never = msg;
          throw new Error(`unknown scheduler message ${JSON.stringify(unreachable)}`);
        }
      }
    };
    this.post({ type: "init", buffer, endpoints, scheduling, staleAfterMs });
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  private take(id: number): Pending | undefined {
    const p = this.pending.get(id);
    this.pending.delete(id);
    return p;
  }

  private post(msg: ToScheduler): void {
    this.worker.postMessage(msg);
  }

  setModels(index: number, models: string[]): void {
    this.post({ type: "models", index, models });
  }

  schedule(model: string, prefixHashes: number[], exclude: number[], onDrops: (d: Record<string, number>) => void): Promise<Grant> {
    const id = this.nextId++;
    return new Promise<Grant>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onDrops });
      this.post({ type: "schedule", id, model, prefixHashes, exclude });
    });
  }

  terminate(): void {
    for (const p of this.pending.values()) p.reject(new LlmgwError("NO_READY_ENDPOINT", "gateway is shutting down"));
    this.pending.clear();
    this.worker.terminate();
  }
}
