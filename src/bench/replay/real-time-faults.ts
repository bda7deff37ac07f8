/**
 * `--fault kill:…` on the real-time replay: the sim-engine process is
 * killed (SIGKILL, as a crash or an OOM kill) at its time after the load
 * started, and FOR later a new one is started on the same port with the
 * same flags. While it runs, the gateway's admin API is read every 50 ms to
 * see when it took the endpoint out of rotation and when it was back; at
 * the end its metrics say how many attempts it retried and streams it
 * continued. The same record as the twin's (src/twin/fault-schedule.ts), so
 * `--check` sets the two side by side.
 */
import { parsePrometheusText } from "../../engines/prom-text.ts";
import { UsageError } from "../../shared/flags.ts";
import { spawnLlmgw } from "../../shared/llmgw-child.ts";
import type { FaultOutcome } from "../../twin/fault-schedule.ts";
import type { TwinFault } from "../../twin/faults.ts";
import type { SimEngine } from "../sim-fleet.ts";

/** How often the gateway's view of a killed endpoint is read, ms. */
const WATCH_EVERY_MS = 50;

/** What the real-time replay can do to its processes: kill them (and start them again). */
export function realTimeFaults(faults: readonly TwinFault[]): TwinFault[] {
  const other = faults.find((f) => f.kind !== "kill");
  if (other)
    throw new UsageError(
      `--fault '${other.spec}': the real-time replay can only kill a sim-engine (kill:ENGINE@AT[+FOR]); ${other.kind} runs in the twin (--twin)`,
    );
  return [...faults];
}

interface EndpointView {
  id: string;
  ready: boolean;
  draining: boolean;
  gpu_faulted: boolean;
  circuit: string;
  model_circuits?: Record<string, string>;
}

function outOfRotation(e: EndpointView): string | undefined {
  if (e.draining) return "draining";
  if (e.gpu_faulted) return "gpu_faulted";
  if (!e.ready) return "not_ready";
  if (e.circuit === "open" || Object.values(e.model_circuits ?? {}).includes("open")) return "circuit_open";
  return undefined;
}

/** Kills scheduled from now on the fleet's engines; `finish` stops the watching and waits for restarts in progress. */
export function scheduleRealTimeKills(
  engines: SimEngine[],
  faults: readonly TwinFault[],
  o: { adminUrl: string; model: string; engineArgs: readonly string[] },
): { outcomes: FaultOutcome[]; finish(): Promise<void> } {
  const t0 = Date.now();
  const timers: ReturnType<typeof setTimeout>[] = [];
  const pending: Promise<unknown>[] = [];
  let over = false;
  const outcomes = faults.map((f) => {
    const e = engines[f.engine]!;
    const out: FaultOutcome = { spec: f.spec, kind: f.kind, engine: e.id, atMs: f.atMs, endedAtMs: null, outAtMs: null, outBecause: null, backAtMs: null };
    const now = () => Date.now() - t0;
    const watch = async () => {
      while (!over) {
        try {
          const body = (await (await fetch(`${o.adminUrl}/admin/v1/endpoints`)).json()) as { endpoints: EndpointView[] };
          const view = body.endpoints.find((x) => x.id === e.id);
          const why = view === undefined ? "not_ready" : outOfRotation(view);
          if (out.outAtMs === null && why !== undefined) {
            out.outAtMs = now();
            out.outBecause = why;
          } else if (out.outAtMs !== null && why === undefined && out.endedAtMs !== null) {
            out.backAtMs = now();
            return;
          }
        } catch {
          // the admin API did not answer this time: look again
        }
        await Bun.sleep(WATCH_EVERY_MS);
      }
    };
    timers.push(
      setTimeout(() => {
        if (over) return;
        pending.push(e.child.stop("SIGKILL"), watch());
        if (f.forMs === Infinity) return;
        timers.push(
          setTimeout(() => {
            if (over) return;
            const port = new URL(e.url).port;
            const restarted = spawnLlmgw(["sim-engine", "--port", port, "--model", o.model, ...o.engineArgs]).then((child) => {
              e.child = child;
              out.endedAtMs = now();
            });
            pending.push(restarted.catch(() => {}));
          }, f.forMs),
        );
      }, f.atMs),
    );
    return out;
  });
  return {
    outcomes,
    async finish() {
      over = true;
      for (const t of timers) clearTimeout(t);
      await Promise.all(pending);
    },
  };
}

/** The gateway's own count of retried attempts and continued streams (its /metrics on the admin listener). */
export async function gatewayFailureCounts(adminUrl: string): Promise<{ retries: number; recoveries: number }> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  let retries = 0;
  let recoveries = 0;
  for (const s of parsePrometheusText(text).samples) {
    if (s.name === "llmgw_retries_total") retries += s.value;
    else if (s.name === "llmgw_stream_recoveries_total" && s.labels.result === "recovered") recoveries += s.value;
  }
  return { retries, recoveries };
}
