/** The jobs routes in process, without a socket: which paths are theirs, methods, malformed ids, and the create-batch request checks. */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createJobsRoutes } from "../../src/jobs/jobs-routes.ts";
import { SqliteJobsStore } from "../../src/jobs/sqlite-jobs-store.ts";
import { routesDeps } from "../helpers/jobs-routes-deps.ts";

const root = mkdtempSync(join(tmpdir(), "llmgw-jobs-routes-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const handle = createJobsRoutes(
  routesDeps({
    store: new SqliteJobsStore(new Database(":memory:", { strict: true }), root),
    knownModel: () => true,
    limits: { maxFileBytes: 1024, maxLines: 10 },
  }),
);
const principal = { tenant: "t" };

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: { error?: { code: string; param: string | null; message: string } } } | undefined> {
  const res = await handle(new Request(`http://gw${path}`, { method, body: body === undefined ? undefined : JSON.stringify(body) }), principal);
  if (res === undefined) return undefined;
  return { status: res.status, json: (await res.json()) as { error?: { code: string; param: string | null; message: string } } };
}

describe("jobs routes", () => {
  test("only /v1/files… and /v1/batches… are answered; wrong methods are 405; unknown sub-paths and malformed ids 404", async () => {
    expect(await call("POST", "/v1/chat/completions")).toBeUndefined();
    expect(await call("GET", "/v1/filesystem")).toBeUndefined();
    expect((await call("PUT", "/v1/batches"))?.status).toBe(405);
    expect((await call("GET", "/v1/batches/b/x"))?.status).toBe(404);
    expect((await call("GET", "/v1/files/%E0%A4%A"))?.status).toBe(404);
    expect((await call("GET", "/v1/batches/batch_nope"))?.json.error).toMatchObject({ code: "NOT_FOUND", message: "No such Batch: batch_nope" });
  });

  test("create-batch checks: JSON, known arguments, endpoint, completion window, metadata, the file", async () => {
    const base = { input_file_id: "file-x", endpoint: "/v1/chat/completions", completion_window: "24h" };
    const cases: [unknown, number, string | null][] = [
      ["{not json", 400, null],
      [{ ...base, colour: "red" }, 400, "colour"],
      [{ ...base, endpoint: "/v1/images" }, 400, "endpoint"],
      [{ ...base, completion_window: "48h" }, 400, "completion_window"],
      [{ ...base, metadata: { k: 1 } }, 400, "metadata"],
      [{ ...base, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, 400, "metadata"],
      [base, 404, "input_file_id"],
    ];
    for (const [body, status, param] of cases) {
      const res = await handle(
        new Request("http://gw/v1/batches", { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) }),
        principal,
      );
      expect(res?.status).toBe(status);
      expect(((await res!.json()) as { error: { param: string | null } }).error.param).toBe(param);
    }
  });

  test("an upload that is not multipart, or has no file, is a 400", async () => {
    expect((await call("POST", "/v1/files", { purpose: "batch" }))?.status).toBe(400);
    const form = new FormData();
    form.set("purpose", "batch");
    const res = await handle(new Request("http://gw/v1/files", { method: "POST", body: form }), principal);
    expect(res?.status).toBe(400);
    expect(((await res!.json()) as { error: { param: string } }).error.param).toBe("file");
  });

  test("creating a large batch gives the event loop a turn between chunks of lines", async () => {
    const store = new SqliteJobsStore(new Database(":memory:", { strict: true }), join(root, "large"));
    const big = createJobsRoutes(routesDeps({ store, knownModel: () => true }));
    const text = "x".repeat(8_000);
    const jsonl = Array.from(
      { length: 2_000 },
      (_, i) => `${JSON.stringify({ custom_id: `r${i}`, method: "POST", url: "/v1/embeddings", body: { model: "m", input: text } })}\n`,
    ).join("");
    const form = new FormData();
    form.set("purpose", "batch");
    form.set("file", new File([jsonl], "big.jsonl"));
    const file = (await (await big(new Request("http://gw/v1/files", { method: "POST", body: form }), principal))!.json()) as { id: string };
    // A timer due every millisecond fires only when the loop gets a turn: a create done in one block (16 MB here) lets it fire never.
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    await Bun.sleep(5);
    const before = ticks;
    const res = await big(
      new Request("http://gw/v1/batches", {
        method: "POST",
        body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" }),
      }),
      principal,
    );
    clearInterval(timer);
    expect(res?.status).toBe(200);
    expect(((await res!.json()) as { request_counts: { total: number } }).request_counts.total).toBe(2_000);
    expect(ticks - before).toBeGreaterThanOrEqual(5);
  });
});
