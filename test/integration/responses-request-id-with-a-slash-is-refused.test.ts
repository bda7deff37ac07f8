/**
 * vLLM answers a Responses request under its `request_id`: one with a `/`
 * (or any character no /v1/responses/{id} path carries) would be stored
 * where GET and DELETE cannot reach it. It is a 400 naming `request_id`; an
 * ordinary one is stored and reachable.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Gateway, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

let gw: Gateway;
let dataDir: string;

beforeAll(async () => {
  const sim = await startSim(["--model", "m", "--output-len", "3"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-request-id-"));
  gw = await startGateway({ data_dir: dataDir, models: [{ name: "m" }], endpoints: [{ id: "sim", url: sim.api, models: ["m"] }] }, 1);
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const create = (body: Record<string, unknown>) =>
  fetch(`${gw.api}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", input: "hi", ...body }),
  });

test("a request_id with a slash, a space or of the wrong type is a 400 naming request_id; an ordinary one is stored, read and deleted", async () => {
  for (const request_id of ["a/b", "../resp_x", "has space", "", 42]) {
    const res = await create({ request_id });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { param: string; code: string; type: string } };
    expect(error).toMatchObject({ param: "request_id", type: "invalid_request_error" });
  }
  const res = await create({ request_id: "resp_client-chosen.1" });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { id: string }).id).toBe("resp_client-chosen.1");
  expect((await fetch(`${gw.api}/v1/responses/resp_client-chosen.1`)).status).toBe(200);
  expect((await fetch(`${gw.api}/v1/responses/resp_client-chosen.1`, { method: "DELETE" })).status).toBe(200);
});
