/** DCGM utilisation is the share of a window in which a step ran: back-to-back steps are one busy span, idle gaps count as idle. */
import { expect, test } from "bun:test";
import { BusyTracker } from "../../src/sim/busy-tracker.ts";

test("back-to-back steps read 100 %, a half-idle second 50 %, an idle one 0", () => {
  const b = new BusyTracker();
  // Steps of 20 ms from t=0 to t=1000, each starting 1 ms after the last ended (a late timer, not an idle GPU).
  for (let t = 0; t < 1000; t += 21) b.busy(t, t + 20);
  expect(b.utilization(1000, 1000)).toBe(1);
  // Idle from 1000 (the last step ended at 1000 at the latest) to 1500, then busy 1500–2000.
  b.idle(1100);
  b.busy(1500, 2000);
  expect(b.utilization(2000, 1000)).toBeCloseTo(0.5, 1);
  b.idle(2100);
  expect(b.utilization(3100, 1000)).toBe(0);
});
