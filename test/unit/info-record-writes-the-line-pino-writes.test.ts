/**
 * The audit line's fast writer (infoRecord) against pino itself: for the same
 * record on the same logger, the same line byte for byte but the time — keys in
 * pino's order (level, time, bindings, fields, msg), a child's bindings
 * included, nothing written below the logger's level.
 */
import { expect, test } from "bun:test";
import pino from "pino";
import { requestAuditRecord } from "../../src/shared/audit.ts";
import { infoRecord } from "../../src/shared/logger.ts";

function capture(level = "info") {
  const lines: string[] = [];
  const log = pino({ level, base: { pid: 4242, role: "serve" } }, { write: (s: string) => void lines.push(s) });
  return { log, lines };
}

const withoutTime = (line: string) => line.replace(/"time":\d+/, '"time":0');

const record = requestAuditRecord({
  requestId: "req-1",
  tenant: 'acme "quoted" \u2028',
  model: "llama",
  band: "interactive",
  route: "/v1/chat/completions",
  endpoint: "sim-1",
  stream: true,
  attempts: 2,
  outcome: "ok",
  status: 200,
  promptTokens: 12,
  completionTokens: 8,
  startedAtMs: 1_700_000_000_000,
  endedAtMs: 1_700_000_000_250,
  ttftMs: 20,
  models: ["llama", "llama-b"],
});

test("an audit line from infoRecord is the line pino writes for the same record", () => {
  const a = capture();
  const b = capture();
  a.log.info(record, "audit");
  infoRecord(b.log, record, "audit");
  expect(b.lines).toHaveLength(1);
  expect(b.lines[0]!.endsWith("\n")).toBe(true);
  expect(withoutTime(b.lines[0]!)).toBe(withoutTime(a.lines[0]!));
});

test("a child logger's bindings come after the base's, as pino writes them", () => {
  const a = capture();
  const b = capture();
  a.log.child({ component: "gateway" }).info(record, "audit");
  infoRecord(b.log.child({ component: "gateway" }), record, "audit");
  expect(withoutTime(b.lines[0]!)).toBe(withoutTime(a.lines[0]!));
  expect(JSON.parse(b.lines[0]!)).toMatchObject({ level: 30, pid: 4242, role: "serve", component: "gateway", audit: "request", msg: "audit" });
});

test("nothing is written when the logger's level is above info; an empty record still makes a valid line", () => {
  const quiet = capture("warn");
  infoRecord(quiet.log, record, "audit");
  expect(quiet.lines).toHaveLength(0);
  const a = capture();
  const b = capture();
  a.log.info({}, "empty");
  infoRecord(b.log, {}, "empty");
  expect(withoutTime(b.lines[0]!)).toBe(withoutTime(a.lines[0]!));
});
