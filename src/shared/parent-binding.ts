/**
 * A child llmgw process that must not outlive the process that started it
 * (the Node launcher, demo, bench, a test): LLMGW_PARENT_PID names that
 * parent. When it is our direct parent the kernel signals us the moment it
 * dies (PR_SET_PDEATHSIG, even after a SIGKILL); a one-second poll covers the
 * rest (no glibc, a parent further up, a parent that died before we asked).
 * Either way we get SIGTERM and shut down as gracefully as on any SIGTERM.
 */
import { existsSync } from "node:fs";
import { constants } from "node:os";
import { setParentDeathSignal } from "./libc.ts";

const PARENT_POLL_MS = 1_000;

/** The pid in LLMGW_PARENT_PID, or null when unset or not a plausible parent. */
function boundParentPid(env: Record<string, string | undefined> = process.env): number | null {
  const parent = Number(env.LLMGW_PARENT_PID);
  return Number.isInteger(parent) && parent > 1 ? parent : null;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Stop this process (SIGTERM to itself) when the LLMGW_PARENT_PID process is gone. */
export function bindToParent(env: Record<string, string | undefined> = process.env): void {
  const parent = boundParentPid(env);
  if (parent === null) return;
  const direct = process.ppid === parent;
  if (direct) setParentDeathSignal(constants.signals.SIGTERM);
  const gone = () => (direct ? process.ppid !== parent : !alive(parent));
  // Checked once now: the parent may have died before the kernel was asked.
  if (gone()) {
    process.kill(process.pid, "SIGTERM");
    return;
  }
  const timer = setInterval(() => {
    if (!gone()) return;
    clearInterval(timer);
    process.kill(process.pid, "SIGTERM");
  }, PARENT_POLL_MS);
  timer.unref();
}

const SETPRIV = "/usr/bin/setpriv";

/**
 * The command line for a child that is not an llmgw process (nginx,
 * redis-server, prometheus) and so cannot watch its parent itself: run
 * under util-linux's setpriv, which asks the kernel to SIGTERM it when the
 * process that spawned it dies — even by SIGKILL or a timeout. Unchanged
 * where setpriv is not installed.
 */
export function diesWithParent(argv: readonly string[]): string[] {
  return existsSync(SETPRIV) ? [SETPRIV, "--pdeathsig", "TERM", ...argv] : [...argv];
}
