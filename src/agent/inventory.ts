/** What the scheduler sees of this node: GPUs (with class and health) and fabric adapters, plus the table people read. */
import { hostname } from "node:os";
import { renderTable } from "../shared/text-table.ts";
import { discoverFabric, type Fabric } from "./fabric.ts";
import { discoverGpus } from "./gpu-discovery.ts";
import { type GpuView, gpuHealth, gpuView } from "./gpu-health.ts";

export interface Inventory {
  node: string;
  gpus: GpuView[];
  fabric: Fabric;
  nvidiaSmi: { path: string; found: boolean; droppedFields: string[]; note: string | null };
}

interface InventorySources {
  nvidiaSmi: string;
  sysfsRoot: string;
  /** Whether a pid belongs to one of our replicas (for the foreign-process flag). */
  isOurs: (pid: number) => boolean;
}

export async function collectInventory(src: InventorySources): Promise<Inventory> {
  const d = await discoverGpus(src.nvidiaSmi);
  const gpus = d.gpus.map((g) => gpuView(g, gpuHealth(g, d.computeApps, src.isOurs))).sort((a, b) => a.index - b.index);
  return {
    node: hostname(),
    gpus,
    fabric: discoverFabric(src.sysfsRoot),
    nvidiaSmi: { path: src.nvidiaSmi, found: d.nvidiaSmiFound, droppedFields: d.droppedFields, note: d.note ?? null },
  };
}

function orDash(v: string | number | null): string {
  return v === null ? "-" : String(v);
}

/** The inventory as tables for people. */
export function formatInventory(inv: Inventory): string {
  const out: string[] = [`node ${inv.node}`, ""];
  if (inv.gpus.length === 0) {
    out.push(`GPUs: none (${inv.nvidiaSmi.note ?? "nvidia-smi listed no GPU"})`);
  } else {
    out.push(
      renderTable(
        ["gpu", "class", "name", "memory", "used MiB", "cc", "util %", "ecc unc.", "health"],
        inv.gpus.map((g) => [
          String(g.index),
          g.class,
          g.name,
          g.memoryTotalGiB === null ? "-" : `${g.memoryTotalGiB.toFixed(2)} GiB`,
          orDash(g.memoryUsedMiB),
          orDash(g.computeCapability),
          orDash(g.utilizationPct),
          orDash(g.eccUncorrectedVolatile),
          g.health.ok ? "ok" : g.health.reasons.join(","),
        ]),
        { title: "GPUs", align: "right", rule: true },
      ),
    );
    if (inv.nvidiaSmi.droppedFields.length > 0) out.push(`(driver rejected ${inv.nvidiaSmi.droppedFields.join(", ")}: shown as -)`);
  }
  out.push("");
  const ports = inv.fabric.adapters.flatMap((a) => a.ports.map((p) => ({ a, p })));
  if (ports.length === 0) {
    out.push("fabric: none (single-node island)");
  } else {
    out.push(
      renderTable(
        ["adapter", "port", "state", "rate", "link layer", "transport", "gid index"],
        ports.map(({ a, p }) => [a.name, String(p.port), orDash(p.state), orDash(p.rate), orDash(p.linkLayer), p.transport, orDash(p.roceGidIndex)]),
        { title: "fabric", align: "right", rule: true },
      ),
    );
    if (inv.fabric.island === "single-node") out.push("(no ACTIVE port: single-node island)");
  }
  return out.join("\n");
}
