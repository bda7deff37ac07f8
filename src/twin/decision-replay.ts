/**
 * Decisions a gateway recorded (LLMGW_RECORD_DECISIONS, see
 * src/admission/decision-record.ts), made again by the fleet twin's
 * scheduling profile for the same config, in the recorded order: each gets
 * the recorded request, endpoint views and random draws, and the prefix
 * index the twin's own earlier decisions built. Where the twin picks
 * another endpoint, the gateway and the twin no longer decide alike.
 *
 * A decision that read token-block keys is not replayed: what the engines'
 * KV-cache events had put in the gateway's KV-block index at that moment is
 * not recorded.
 */
import type { DecisionRecord } from "../admission/decision-record.ts";
import type { Config } from "../config/types.ts";
import { sharedTables } from "../serve/gateway-parts.ts";
import { twinSchedulingProfile } from "./twin-gateway.ts";

interface ReplayResult {
  replayed: number;
  /** Decisions that read token-block keys (not replayable). */
  skipped: number;
  /** Where the twin chose otherwise: the record's position, the gateway's pick and the twin's. */
  differing: { at: number; recorded: number | null; twin: number | null }[];
}

export function replayDecisions(config: Config, records: readonly DecisionRecord[]): ReplayResult {
  const profile = twinSchedulingProfile(config, sharedTables(config));
  const out: ReplayResult = { replayed: 0, skipped: 0, differing: [] };
  records.forEach((r, at) => {
    if (r.req.tokenBlockKeys !== undefined) {
      out.skipped++;
      return;
    }
    let next = 0;
    // Past the recorded draws the twin draws something the gateway did not: NaN makes that pick differ.
    const random = () => r.draws[next++] ?? Number.NaN;
    const { exclude, ...req } = r.req;
    const d = profile.schedule(exclude ? { ...req, exclude: new Set(exclude) } : req, r.views, random);
    out.replayed++;
    const twin = d.endpoint?.index ?? null;
    if (twin !== r.pick || next !== r.draws.length) out.differing.push({ at, recorded: r.pick, twin });
  });
  return out;
}
