/**
 * The agent's node key: 32 random bytes (base64url) made at the first start
 * with --register and kept in `<state-dir>/node-key` (mode 0600). It is sent
 * with every registration; the gateway binds the node's name to the first
 * key it sees under that name and refuses the name to any other
 * (src/control/node-binding.ts). An agent that loses its state directory has
 * a new key, and an operator approves the re-bind (`llmgw ctl rebind NODE`).
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const NODE_KEY_FILE = "node-key";
const KEY_BYTES = 32;
const KEY_RE = /^[A-Za-z0-9_-]{32,256}$/;

/** The key in `stateDir`, made now if there is none; a file that is not a key is an error (never replaced: the gateway would refuse the new one). */
export function loadOrCreateNodeKey(stateDir: string): string {
  const path = join(stateDir, NODE_KEY_FILE);
  const existing = readKey(path);
  if (existing !== undefined) return existing;
  mkdirSync(stateDir, { recursive: true });
  const key = randomBytes(KEY_BYTES).toString("base64url");
  try {
    writeFileSync(path, `${key}\n`, { mode: 0o600, flag: "wx" });
    return key;
  } catch (err) {
    // Another agent on the same state directory made it first: take theirs.
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return readKey(path) ?? key;
    throw err;
  }
}

function readKey(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const key = text.trim();
  if (!KEY_RE.test(key))
    throw new Error(
      `${path} is not a node key; remove it (the agent makes a new one) and have an operator approve the re-bind of this node's name (llmgw ctl rebind NODE)`,
    );
  return key;
}
