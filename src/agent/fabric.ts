/**
 * Fabric discovery from /sys/class/infiniband (root configurable): adapters,
 * ports, state, rate, link layer (InfiniBand, or Ethernet = RoCE) and, for
 * RoCE, the GID index NCCL should use. Attribute formats come from the
 * kernel's drivers/infiniband/core/sysfs.c ("4: ACTIVE", "400 Gb/sec (4X NDR)").
 * No InfiniBand directory is not an error: the node is a single-node island.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const DEFAULT_SYSFS_INFINIBAND = "/sys/class/infiniband";

export type Transport = "ib" | "roce" | "other";

interface GidEntry {
  index: number;
  gid: string;
  /** "RoCE v2", "IB/RoCE v1"; null when the kernel does not say. */
  type: string | null;
  /** Network interface behind a RoCE GID (e.g. "eth2"); null for IB. */
  netdev: string | null;
}

export interface FabricPort {
  port: number;
  /** "ACTIVE", "DOWN", "INIT", "ARMED"; null when unreadable. */
  state: string | null;
  active: boolean;
  physState: string | null;
  rate: string | null;
  rateGbps: number | null;
  linkLayer: string | null;
  transport: Transport;
  /** Non-zero GIDs (RoCE only: IB ports do not need a GID index). */
  gids: GidEntry[];
  /** The GID index NCCL_IB_GID_INDEX should name for a RoCE port; null for IB or when none fits. */
  roceGidIndex: number | null;
}

interface FabricAdapter {
  name: string;
  ports: FabricPort[];
}

export interface Fabric {
  adapters: FabricAdapter[];
  /** "single-node" when no adapter has an active port: nothing to reach other nodes with. */
  island: "single-node" | "fabric";
}

/** "4: ACTIVE" → "ACTIVE". */
export function parsePortState(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  const m = /^\s*\d+\s*:\s*(\S+)/.exec(raw);
  return m?.[1] ?? (raw.trim() || null);
}

/** "400 Gb/sec (4X NDR)" → 400; "2.5 Gb/sec (1X SDR)" → 2.5. */
export function parseRateGbps(raw: string | undefined): number | null {
  const m = raw === undefined ? null : /^\s*([\d.]+)\s*Gb\/sec/.exec(raw);
  const n = m ? Number(m[1]) : NaN;
  return Number.isFinite(n) ? n : null;
}

function transportOf(linkLayer: string | null): Transport {
  if (linkLayer === "InfiniBand") return "ib";
  if (linkLayer === "Ethernet") return "roce";
  return "other";
}

const ZERO_GID = /^[0:]+$/;
const IPV4_MAPPED = /^0000:0000:0000:0000:0000:ffff:/i;

/**
 * The GID index for NCCL on a RoCE port: a RoCE v2 GID carrying an IPv4
 * address (routable, what NCCL's own auto-selection prefers), else any RoCE
 * v2 GID, else none. Lowest index wins within a tier.
 */
export function pickRoceGidIndex(gids: readonly GidEntry[]): number | null {
  const v2 = gids.filter((g) => g.type?.toLowerCase() === "roce v2").sort((a, b) => a.index - b.index);
  const mapped = v2.find((g) => IPV4_MAPPED.test(g.gid));
  return (mapped ?? v2[0])?.index ?? null;
}

interface RawPort {
  port: number;
  files: Partial<Record<"state" | "phys_state" | "rate" | "link_layer", string>>;
  gids: GidEntry[];
}

function buildPort(raw: RawPort): FabricPort {
  const state = parsePortState(raw.files.state);
  const linkLayer = raw.files.link_layer?.trim() || null;
  const transport = transportOf(linkLayer);
  const gids = transport === "roce" ? raw.gids.filter((g) => !ZERO_GID.test(g.gid)) : [];
  return {
    port: raw.port,
    state,
    active: state === "ACTIVE",
    physState: parsePortState(raw.files.phys_state),
    rate: raw.files.rate?.trim() || null,
    rateGbps: parseRateGbps(raw.files.rate),
    linkLayer,
    transport,
    gids,
    roceGidIndex: transport === "roce" ? pickRoceGidIndex(gids) : null,
  };
}

function summarizeFabric(adapters: FabricAdapter[]): Fabric {
  const anyActive = adapters.some((a) => a.ports.some((p) => p.active));
  return { adapters, island: anyActive ? "fabric" : "single-node" };
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

function listDir(path: string): string[] {
  try {
    return readdirSync(path).sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
  } catch {
    return [];
  }
}

function readGids(portDir: string): GidEntry[] {
  const out: GidEntry[] = [];
  for (const name of listDir(join(portDir, "gids"))) {
    const index = Number(name);
    const gid = readText(join(portDir, "gids", name))?.trim();
    if (!Number.isInteger(index) || !gid || ZERO_GID.test(gid)) continue;
    const type = readText(join(portDir, "gid_attrs", "types", name))?.trim() || null;
    const netdev = readText(join(portDir, "gid_attrs", "ndevs", name))?.trim() || null;
    out.push({ index, gid, type, netdev });
  }
  return out;
}

/** Read the adapters under `root`; a missing root is an empty fabric. */
export function discoverFabric(root: string = DEFAULT_SYSFS_INFINIBAND): Fabric {
  const adapters: FabricAdapter[] = [];
  for (const dev of listDir(root)) {
    const ports: FabricPort[] = [];
    for (const p of listDir(join(root, dev, "ports"))) {
      const port = Number(p);
      if (!Number.isInteger(port)) continue;
      const dir = join(root, dev, "ports", p);
      const files: RawPort["files"] = {};
      for (const f of ["state", "phys_state", "rate", "link_layer"] as const) {
        const v = readText(join(dir, f));
        if (v !== undefined) files[f] = v;
      }
      ports.push(buildPort({ port, files, gids: readGids(dir) }));
    }
    adapters.push({ name: dev, ports });
  }
  return summarizeFabric(adapters);
}
