/**
 * Who holds a TCP port: the listening socket's inode from /proc/net/tcp{,6},
 * then the process with that inode among its fds. Lets the agent and the
 * gateway say "port 7070 is held by pid 1234 (an earlier llmgw agent)"
 * instead of a bare EADDRINUSE, and the agent refuse a replica whose port
 * someone else holds.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { createServer } from "node:net";
import { basename } from "node:path";

/** /proc/net/tcp `st` column for a listening socket (TCP_LISTEN in include/net/tcp_states.h). */
const TCP_LISTEN = "0A";

export interface PortHolder {
  pid: number;
  /** Its command line; empty when /proc would not say. */
  argv: string[];
}

/** Inodes of the sockets listening on `port` in a /proc/net/tcp or tcp6 table. */
export function listeningInodes(table: string, port: number): number[] {
  const inodes: number[] = [];
  for (const line of table.split("\n").slice(1)) {
    const cols = line.trim().split(/\s+/);
    const local = cols[1];
    if (!local || cols[3] !== TCP_LISTEN) continue;
    const hexPort = local.slice(local.lastIndexOf(":") + 1);
    const inode = Number(cols[9]);
    if (Number.parseInt(hexPort, 16) === port && Number.isInteger(inode) && inode > 0) inodes.push(inode);
  }
  return inodes;
}

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

function ownerOf(inodes: ReadonlySet<number>, procRoot: string): number | null {
  let pids: string[];
  try {
    pids = readdirSync(procRoot).filter((n) => /^\d+$/.test(n));
  } catch {
    return null;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`${procRoot}/${pid}/fd`);
    } catch {
      continue; // gone, or another user's (not root)
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`${procRoot}/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(Number(m[1]))) return Number(pid);
    }
  }
  return null;
}

/**
 * The process listening on `port`: null when nothing listens, "unknown" when
 * a socket listens but its process is not visible to this user.
 */
export function findPortHolder(port: number, procRoot = "/proc"): PortHolder | "unknown" | null {
  const inodes = new Set([...listeningInodes(readText(`${procRoot}/net/tcp`), port), ...listeningInodes(readText(`${procRoot}/net/tcp6`), port)]);
  if (inodes.size === 0) return null;
  const pid = ownerOf(inodes, procRoot);
  if (pid === null) return "unknown";
  // NUL-separated; empty for a zombie or a kernel thread.
  const cmdline = readText(`${procRoot}/${pid}/cmdline`).replace(/\0$/, "");
  return { pid, argv: cmdline === "" ? [] : cmdline.split("\0") };
}

/** Whether `argv` runs `llmgw <command>` (through src/cli.ts or the llmgw launcher). */
export function isLlmgwCommand(argv: readonly string[], command: string): boolean {
  const entry = argv.findIndex((a) => basename(a) === "cli.ts" || basename(a) === "llmgw");
  return entry >= 0 && argv[entry + 1] === command;
}

/** A command line short enough for a log line. */
function shortCommand(argv: readonly string[], max = 160): string {
  const text = argv.join(" ");
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** "held by pid N (cmd)", or by a process this user cannot see. */
export function holderText(holder: PortHolder | "unknown" | null): string {
  if (holder === null || holder === "unknown") return "held by a process this user cannot see (try as root: ss -ltnp)";
  return `held by another process, pid ${holder.pid}${holder.argv.length > 0 ? ` (${shortCommand(holder.argv)})` : ""}`;
}

/** What to say about the llmgw command an operator starts, when its port is taken. */
interface ListenerOwner {
  /** `agent`, `serve`: an earlier one of these is named as such. */
  command: string;
  /** The systemd unit that runs it, for the remedy. */
  unit: string;
  /** The flag that moves it to another port. */
  flag: string;
}

/** Why `owner` cannot listen on `port`, and what to do about it, in one line. */
export function listenRefusal(port: number, holder: PortHolder | "unknown" | null, owner: ListenerOwner): string {
  const { command, unit, flag } = owner;
  if (holder !== null && holder !== "unknown" && isLlmgwCommand(holder.argv, command)) {
    return (
      `port ${port} is held by an earlier llmgw ${command}, pid ${holder.pid} (${shortCommand(holder.argv)}). ` +
      `Stop it first (kill ${holder.pid}; under systemd: systemctl stop ${unit}), or give this one another ${flag} port`
    );
  }
  return `port ${port} is ${holderText(holder)}; free it or give the ${command === "agent" ? "agent" : "gateway"} another ${flag} port`;
}

/** Whether `host:port` can be bound now (what the engine is about to try). */
export function canBind(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** A listener that cannot bind because its port is taken; the message names the port and, where /proc says, the holder. */
export class PortInUseError extends Error {
  constructor(
    readonly port: number,
    message: string,
  ) {
    super(message);
    this.name = "PortInUseError";
  }
}

/** One listener of a command: what it is called, where it binds, which flag moves it. */
export interface ListenerSpec {
  what: string;
  host: string;
  port: number;
  flag: string;
}

function inUse(l: ListenerSpec, owner: Omit<ListenerOwner, "flag">): PortInUseError {
  return new PortInUseError(
    l.port,
    `cannot start the ${l.what} on ${l.host}:${l.port}: ${listenRefusal(l.port, findPortHolder(l.port), { ...owner, flag: l.flag })}`,
  );
}

/** Throws PortInUseError for the first listener whose (fixed) port cannot be bound now; port 0 always can. */
export async function ensurePortsFree(listeners: readonly ListenerSpec[], owner: Omit<ListenerOwner, "flag">): Promise<void> {
  for (const l of listeners) if (l.port !== 0 && !(await canBind(l.host, l.port))) throw inUse(l, owner);
}

/** `bind()`, with EADDRINUSE (taken since ensurePortsFree looked) turned into a PortInUseError naming the holder. */
export function bindExplained<T>(l: ListenerSpec, owner: Omit<ListenerOwner, "flag">, bind: () => T): T {
  try {
    return bind();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") throw inUse(l, owner);
    throw err;
  }
}
