/**
 * The main thread's admission decision for a request, without a message:
 * it flows at once when nothing waits ahead of it for its pool and its band's
 * published limit has room (one compare-and-swap on the pool's held count),
 * then the chooser picks and claims the endpoint. Otherwise the request goes
 * to the scheduler worker ("slow"), which queues it and decides there with
 * the same claim and the same chooser.
 */
import type { Config } from "../config/types.ts";
import type { PoolTable } from "../shared/endpoint-table.ts";
import type { ChooseRequest, EndpointChooser } from "./chooser.ts";

type FastOutcome =
  | {
      kind: "granted";
      index: number;
      pool: number;
      scores: Readonly<Record<string, number>>;
      drops: Readonly<Record<string, number>>;
      candidates: number;
      probe: number;
      circuit: number;
      prefillTokens: number;
    }
  /** Flowed but nothing could be chosen (unready, open, faulted…): the worker would say the same. */
  | { kind: "no_endpoint"; drops: Readonly<Record<string, number>> }
  /** Saturated, something queued ahead, or a lost race: the scheduler worker decides. */
  | { kind: "slow" };

const SLOW: FastOutcome = Object.freeze({ kind: "slow" });

export function fastAdmit(
  pools: PoolTable,
  chooser: EndpointChooser,
  admission: Config["admission"],
  pool: number,
  req: ChooseRequest & { band: number },
  random?: () => number,
  now?: number,
): FastOutcome {
  if (pools.queuedAhead(pool, req.band) > 0) return SLOW;
  if (admission.enabled) {
    if (!pools.tryClaim(pool, req.band)) return SLOW;
  } else {
    pools.take(pool, req.band);
  }
  const c = chooser.choose(req, random, now);
  if (c.ok)
    return {
      kind: "granted",
      index: c.index,
      pool: c.pool,
      scores: c.scores,
      drops: c.drops,
      candidates: c.candidates,
      probe: c.probe,
      circuit: c.circuit,
      prefillTokens: c.prefillTokens,
    };
  pools.release(pool, req.band);
  return { kind: "no_endpoint", drops: c.drops };
}
