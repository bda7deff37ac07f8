/**
 * A self-registered node's name belongs to the agent that registered it
 * first. Each agent generates its own node key at its first start and keeps
 * it in its state directory (src/agent/node-key.ts); the first registration
 * under a name that presents a key binds the name to that key (the gateway
 * stores only its sha-256), and every later registration under the name must
 * present the same key. Without this, whoever holds the shared registration
 * token could point another node's name at any URL: the real node would go
 * Unknown and the gateway would poll the impostor. An operator who moves a
 * name to another agent approves a re-bind (POST
 * /admin/v1/fleet/nodes/{node}/rebind, `llmgw ctl rebind`), which drops the
 * binding: the next registration binds the name anew.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { NodeBinding } from "./types.ts";

export function keySha256(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** Constant-time: whether `presented` is the key `binding` was made with. */
export function keyMatches(binding: NodeBinding, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  return timingSafeEqual(Buffer.from(keySha256(presented), "hex"), Buffer.from(binding.keySha256, "hex"));
}
