/**
 * A gateway on the embedded state (keys.sqlite in data_dir) with auth on and
 * no key in its config file: a live key created through the admin API works
 * at once, its usage is written when the gateway stops, and after a restart
 * on the same data_dir the key still works and its usage is still there;
 * a revoke holds across the restart too.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

const ADMIN_TOKEN = "admin-token-0123456789";

afterAll(stopAll);

test("a live key on the embedded store survives a restart with its usage; a revoke does too", async () => {
  const sim = await startSim(["--model", "m", "--itl-ms", "1", "--output-len", "3"]);
  const config = {
    log_level: "warn",
    data_dir: mkdtempSync(join(tmpdir(), "llmgw-keys-")),
    admin: { token: ADMIN_TOKEN },
    auth: { enabled: true },
    endpoints: [{ id: "sim", url: sim.api, models: ["m"] }],
  };
  const admin = (gw: { admin: string }, method: string, path: string, body?: unknown) =>
    fetch(`${gw.admin}/admin/v1/keys${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const chat = async (gw: { api: string }, key: string) => {
    const r = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 3 }),
    });
    await r.arrayBuffer();
    return r.status;
  };

  const first = await startGateway(config, 1);
  expect(await chat(first, "no-such-key")).toBe(401);
  const key = (await (await admin(first, "POST", "", { name: "kept", tenant: "t" })).json()) as { id: string; secret: string };
  expect(await chat(first, key.secret)).toBe(200);
  expect(await chat(first, key.secret)).toBe(200);
  expect(await first.stop()).toBe(0);

  const second = await startGateway(config, 1);
  expect(await chat(second, key.secret)).toBe(200);
  const usage = (await (await admin(second, "GET", `/${key.id}/usage`)).json()) as { requests: number; tokens_out: number };
  expect(usage.requests).toBe(3);
  expect(usage.tokens_out).toBeGreaterThan(0);
  expect((await admin(second, "POST", `/${key.id}/revoke`)).status).toBe(200);
  expect(await chat(second, key.secret)).toBe(401);
  await second.stop();

  const third = await startGateway(config, 1);
  expect(await chat(third, key.secret)).toBe(401);
  const listed = (await (await admin(third, "GET", "")).json()) as { keys: { id: string; state: string; last_used_ms: number | null }[] };
  expect(listed.keys).toEqual([expect.objectContaining({ id: key.id, state: "revoked" })]);
  expect(listed.keys[0]!.last_used_ms).not.toBeNull();
});
