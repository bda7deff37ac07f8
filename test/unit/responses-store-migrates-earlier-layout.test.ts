/**
 * A responses.sqlite written by an earlier llmgw (one wide row per record:
 * input items and the background lease inline) still opens and reads: its
 * responses, their input items and conversations, and its background
 * responses still to run, which a runner claims.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { expandedInput } from "../../src/jobs/responses-objects.ts";
import { SqliteResponsesStore } from "../../src/jobs/responses-store.ts";

const EARLIER = `
CREATE TABLE responses (tenant TEXT NOT NULL, id TEXT NOT NULL, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, status TEXT NOT NULL,
  response TEXT NOT NULL, input TEXT NOT NULL, context TEXT NOT NULL, request TEXT, owner TEXT, lease_until_ms INTEGER, bytes INTEGER NOT NULL,
  PRIMARY KEY (tenant, id)) WITHOUT ROWID;
CREATE INDEX responses_by_tenant_age ON responses (tenant, created_ms);
CREATE INDEX responses_by_expiry ON responses (expires_ms);
CREATE INDEX responses_background ON responses (lease_until_ms) WHERE request IS NOT NULL;
`;

test("an earlier layout's records, input items, conversations and queued background responses read back after the migration", async () => {
  const db = new Database(":memory:", { strict: true });
  db.run(EARLIER);
  const now = Date.now();
  const insert = db.query("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const whole = JSON.stringify([
    { role: "user", content: "q1" },
    { role: "assistant", content: "a1" },
    { role: "user", content: "q2" },
  ]);
  insert.run(
    "t",
    "resp_done",
    now,
    now + 60_000,
    "completed",
    JSON.stringify({ id: "resp_done", output: [{ role: "assistant", content: "a2" }] }),
    '[{"id":"msg_a"},{"id":"msg_b"}]',
    whole,
    null,
    null,
    null,
    100,
  );
  insert.run("t", "resp_bg", now + 1, now + 60_000, "queued", '{"id":"resp_bg","status":"queued"}', "[]", "[]", '{"body":{}}', null, null, 50);

  const store = new SqliteResponsesStore(db);
  expect((await store.get("t", "resp_done", now))?.status).toBe("completed");
  const page = await store.inputItems("t", "resp_done", now, { limit: 10, order: "asc" });
  expect("page" in page && (page.page.data as { id: string }[]).map((i) => i.id)).toEqual(["msg_a", "msg_b"]);
  const links = (await store.conversation("t", "resp_done", now))!.links;
  expect(expandedInput(links, []).map((i) => (i as { content: string }).content)).toEqual(["q1", "a1", "q2", "a2"]);
  expect((await store.claim("r", now, now + 30_000, 5)).map((r) => r.id)).toEqual(["resp_bg"]);
  // Opening it again is a no-op.
  new SqliteResponsesStore(db);
  expect((await store.get("t", "resp_bg", now))?.owner).toBe("r");
});
