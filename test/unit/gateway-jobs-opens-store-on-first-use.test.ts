/** GatewayJobs (the batch store inside serve): data_dir untouched until first use, resumed at start when a store exists, an unusable data_dir a clear 500 that the next request tries again. */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig } from "../../src/config/load.ts";
import { GatewayJobs } from "../../src/jobs/jobs-service.ts";
import { STATE_DB_FILE } from "../../src/jobs/state-db.ts";
import { LlmgwError } from "../../src/shared/errors.ts";
import { logger } from "../../src/shared/logger.ts";

const root = mkdtempSync(join(tmpdir(), "llmgw-jobs-lazy-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function jobs(dataDir: string): GatewayJobs {
  return new GatewayJobs({
    config: buildConfig({ data_dir: dataDir }),
    log: logger(),
    send: async () => ({ status: 200, body: "{}" }),
    saturated: () => false,
    poolOf: () => "default",
    knownModel: () => true,
  });
}

test("nothing is written to data_dir until the store is first needed; a later start resumes it at once", async () => {
  const dir = join(root, "state");
  const first = jobs(dir);
  expect(await first.resume()).toBe(false);
  expect(existsSync(dir)).toBe(false);
  const open = await first.opened();
  expect(await first.opened()).toBe(open); // opened once
  expect(existsSync(join(dir, STATE_DB_FILE))).toBe(true);
  expect(first.lineStats()).toEqual({ completed: 0, failed: 0, retried: 0, waited: 0 });
  await first.stop();
  first.close();

  const second = jobs(dir);
  expect(await second.resume()).toBe(true);
  await second.stop();
  second.close();
  await expect(second.opened()).rejects.toThrow("shutting down");
});

test("an unusable data_dir is a 500 naming it, and the next call tries again", async () => {
  // A path below a regular file cannot be created, whoever runs the test (root included).
  const blocker = join(root, "not-a-dir");
  writeFileSync(blocker, "");
  const j = jobs(join(blocker, "state"));
  const err = await j.opened().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(LlmgwError);
  expect((err as LlmgwError).status).toBe(500);
  expect((err as LlmgwError).message).toContain(join(blocker, "state"));
  rmSync(blocker);
  await j.opened(); // not remembered as failed
  expect(existsSync(join(blocker, "state", STATE_DB_FILE))).toBe(true);
  await j.stop();
  j.close();
});
