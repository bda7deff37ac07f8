/** A literal autoscaling policy for the control laws' tests: llm-d's SLO, 15 s decisions, no headroom; `over` changes any field. */
import type { AutoscalePolicy } from "../../src/control/autoscale/policy.ts";

const TEST_SLO = { ttftMs: 3000, itlMs: 100, percentile: 90 };

export function testPolicy(over: Partial<AutoscalePolicy> = {}): AutoscalePolicy {
  return {
    minReplicas: 2,
    maxReplicas: 10,
    slo: TEST_SLO,
    law: "capacity",
    intervalMs: 15_000,
    scaleUpWindowMs: 0,
    scaleDownWindowMs: 180_000,
    maxSurge: 4,
    scaleDownEveryMs: 60_000,
    targetUtilization: 1,
    startupMs: 100_000,
    ...over,
  };
}
