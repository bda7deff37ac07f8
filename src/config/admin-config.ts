/**
 * The `admin` block: the token every state-changing admin request needs, and
 * the Host names the admin listener answers to besides its own address (a
 * DNS name that resolves to it, a proxy's name). Everything else is refused
 * (src/admin/request-guard.ts), so that a page an operator opens cannot use
 * the listener through DNS rebinding or cross-site requests.
 */
import { z } from "zod";
import type { AdminConfig } from "./types.ts";

/** A host name as a Host header carries it, without port: a DNS name, or an IPv4 or IPv6 address (IPv6 without brackets). */
const hostName = z
  .string()
  .max(253)
  .regex(/^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*$|^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*$/, {
    message: "expected a host name without port or scheme, e.g. gw1.internal or 10.0.0.5",
  });

export const adminSchema = z.strictObject({
  /**
   * Bearer token for every admin route that changes state (the management
   * API's writes, POST /admin/v1/diagnostics/gc); also LLMGW_ADMIN__TOKEN.
   * Unset: fleet.admin_token, and without either every change is refused.
   */
  token: z.string().min(16, { message: "expected at least 16 characters" }).optional(),
  /** Host names (no port) the admin listener answers to besides its own address, loopback names and, on a wildcard address, IP literals. */
  allowed_hosts: z.array(hostName).max(256).default([]),
});

export const ADMIN_DEFAULTS = adminSchema.parse({});

type AdminWire = z.output<typeof adminSchema>;

/** admin.token and fleet.admin_token are one token: both set and different is a mistake. */
export function adminConfigIssues(admin: AdminWire, fleetAdminToken: string | undefined): string[] {
  if (admin.token !== undefined && fleetAdminToken !== undefined && admin.token !== fleetAdminToken) {
    return ["admin.token: differs from fleet.admin_token; they are the same token (set one of them)"];
  }
  return [];
}

export function toAdminConfig(admin: AdminWire, fleetAdminToken: string | undefined): AdminConfig {
  return { token: admin.token ?? fleetAdminToken, allowedHosts: admin.allowed_hosts.map((h) => h.toLowerCase()) };
}
