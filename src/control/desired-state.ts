/**
 * Which desired models hold after a start: the config's or the stored ones.
 * A model changed through the management API keeps its change across
 * restarts; a config entry that itself changed since the last start wins
 * (the operator edited the file on purpose); a model that came from the
 * config and left it is removed. Pure, apart from hashing.
 */
import { createHash } from "node:crypto";
import { fleetModelWire } from "../config/fleet-schema.ts";
import type { FleetModelSpec } from "../config/types.ts";
import type { StoredModel } from "./types.ts";

type DesiredChange = { kind: "put"; model: StoredModel; note: string } | { kind: "delete"; name: string; note: string };

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

/** Stable hash of a model spec (key order and defaults do not matter). */
export function specHash(spec: FleetModelSpec): string {
  return createHash("sha256")
    .update(JSON.stringify(canonical(fleetModelWire(spec))))
    .digest("hex");
}

export function configModelChanges(configured: readonly FleetModelSpec[], stored: readonly StoredModel[], now: number): DesiredChange[] {
  const byName = new Map(stored.map((s) => [s.spec.name, s]));
  const changes: DesiredChange[] = [];
  for (const spec of configured) {
    const hash = specHash(spec);
    const prev = byName.get(spec.name);
    const model: StoredModel = { spec, source: "config", configHash: hash, updatedAt: now };
    if (!prev) changes.push({ kind: "put", model, note: "new in the config" });
    else if (prev.configHash !== hash) changes.push({ kind: "put", model, note: "the config entry changed since the last start: the config wins" });
  }
  const names = new Set(configured.map((m) => m.name));
  for (const s of stored) {
    if (s.source === "config" && !names.has(s.spec.name)) changes.push({ kind: "delete", name: s.spec.name, note: "removed from the config" });
  }
  return changes;
}
