/**
 * Process-group operations on engines: signal a whole group, wait until no
 * live member is left, and decide whether a pid file still names the engine
 * we launched (same command line, process group and start time).
 */
import type { PidFile } from "./pid-files.ts";
import { cmdlineMatches, groupMembers, readCmdline, readStat } from "./proc-info.ts";

export { groupMembers };

/** Why the process a pid file names is not ours to adopt; null when it is. */
export function adoptionRefusal(rec: PidFile): string | null {
  const st = readStat(rec.pid);
  const live = readCmdline(rec.pid);
  if (!st || st.state === "Z" || !live) return `pid ${rec.pid} is gone`;
  if (!cmdlineMatches(rec.argv, live)) return `pid ${rec.pid} runs another command line`;
  if (st.pgid !== rec.pgid) return `pid ${rec.pid} is in another process group`;
  if (rec.startTime !== null && st.startTime !== rec.startTime) return `pid ${rec.pid} started at another time (pid reused)`;
  return null;
}

export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // the group is already empty
  }
}

/** Resolves true once the leader has exited and no live member of the group is left; false on timeout. */
export async function waitGroupGone(pgid: number, child: Bun.Subprocess | null, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const leaderDone = child === null || child.exitCode !== null || child.signalCode !== null;
    if (leaderDone && groupMembers(pgid).length === 0) return true;
    await Bun.sleep(50);
  }
  return false;
}
