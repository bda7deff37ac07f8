/**
 * The relay's side of a mid-stream continuation (issue 13), with scripted
 * streams and a scripted recovery: at a break the broken attempt ends with
 * its verdict, the recovery is asked for a continuation, and the relay goes
 * on with it (its events through rewrite()) — or ends with the break's own
 * error; a client that leaves during the recovery gets nothing more and the
 * continuation is cancelled; evict() is a break of its own cause that is
 * not the engine's fault.
 */
import { describe, expect, test } from "bun:test";
import type { RelayOwner, RelayRecovery } from "../../src/gateway/proxy/relay.ts";
import { SseRelay } from "../../src/gateway/proxy/relay.ts";
import type { OpenStream } from "../../src/gateway/proxy/upstream.ts";
import type { AttemptVerdict, Usage } from "../../src/gateway/request/exchange.ts";
import type { Evictable } from "../../src/gateway/stream-evictions.ts";
import type { BreakCause } from "../../src/metrics/names.ts";
import { HANG, openStreamOf } from "../helpers/scripted-stream.ts";

const dec = new TextDecoder();
const TOKEN = (t: string) => `data: {"id":"x","choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;
const USAGE = `data: {"id":"y","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}\n\n`;
const DONE = "data: [DONE]\n\n";

function owner() {
  const log: string[] = [];
  const o: RelayOwner & { log: string[] } = {
    includeUsage: true,
    delivered: 0,
    choices: 1,
    usage: undefined,
    log,
    firstToken() {},
    tokens() {},
    malformed() {},
    endAttempt(v: AttemptVerdict) {
      log.push(`end ${v.kind}${v.failure ? ` ${v.failure}` : ""}`);
    },
    finish(outcome, _status, error) {
      log.push(`finish ${outcome}${error ? `: ${error}` : ""}`);
    },
  };
  return o;
}

/** A recovery that answers each break from a script, rewriting continuation events by tagging them. */
class ScriptedRecovery implements RelayRecovery {
  readonly tracking = true;
  rewriting = false;
  usage: Usage | undefined;
  observed: string[] = [];
  causes: BreakCause[] = [];
  closed = false;
  stream: Evictable | undefined;

  constructor(private readonly next: () => Promise<OpenStream | undefined>) {}

  bind(stream: Evictable): void {
    this.stream = stream;
  }
  observe(event: Uint8Array): void {
    this.observed.push(dec.decode(event));
  }
  rewrite(kind: "data" | "usage", event: Uint8Array): Uint8Array | undefined {
    if (kind === "usage") this.usage = { prompt_tokens: 4, completion_tokens: 5 };
    if (dec.decode(event).includes('"role"')) return undefined; // the continuation's own role delta
    return new TextEncoder().encode(dec.decode(event).replace('"id":"y"', '"id":"x"'));
  }
  async resume(cause: BreakCause): Promise<OpenStream | undefined> {
    this.causes.push(cause);
    const open = await this.next();
    if (open) this.rewriting = true;
    return open;
  }
  close(): void {
    this.closed = true;
  }
}

/** Drain a relay to its end; the client's text. */
async function run(relay: SseRelay): Promise<string> {
  let text = "";
  for (let pieces = await relay.next(); pieces; pieces = await relay.next()) for (const p of pieces) text += dec.decode(p);
  return text;
}

describe("a relay with a recovery", () => {
  test("a cut stream goes on with the continuation: one stream, the broken attempt's verdict given at the break", async () => {
    const x = owner();
    const role = 'data: {"id":"y","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n';
    const cont = openStreamOf([role, TOKEN("c").replace('"x"', '"y"'), TOKEN("d").replace('"x"', '"y"'), USAGE, DONE]);
    const r = new ScriptedRecovery(async () => cont);
    const text = await run(new SseRelay(x, openStreamOf([TOKEN("a"), TOKEN("b"), new Error("socket closed")]), r));
    expect(text).toBe(TOKEN("a") + TOKEN("b") + TOKEN("c") + TOKEN("d") + USAGE.replace('"id":"y"', '"id":"x"') + DONE);
    expect(r.observed).toEqual([TOKEN("a"), TOKEN("b")]);
    expect(r.causes).toEqual(["cut"]);
    expect(x.log).toEqual(["end fault truncated", "end neutral", "finish ok"]);
    expect(x.usage).toEqual({ prompt_tokens: 4, completion_tokens: 5 }); // the recovery's honest usage, not the segment's
    expect(x.delivered).toBe(4); // the dropped role delta is not
    expect(r.closed).toBe(true);
  });

  test("no continuation: the break's own explicit error, then [DONE]", async () => {
    const x = owner();
    const r = new ScriptedRecovery(async () => undefined);
    const text = await run(new SseRelay(x, openStreamOf([TOKEN("a"), 'data: {"error":{"message":"engine died"}}\n\n', TOKEN("never")]), r));
    expect(text.startsWith(TOKEN("a"))).toBe(true);
    expect(text).not.toContain("never");
    expect(text).toContain('"code":"UPSTREAM_ERROR"');
    expect(text.endsWith(DONE)).toBe(true);
    expect(r.causes).toEqual(["engine_error"]);
    expect(x.log).toEqual(["end fault status_5xx", "end neutral", "finish stream_error: engine died"]);
  });

  test("the client leaves while the continuation opens: nothing more is sent and the continuation is cancelled", async () => {
    const x = owner();
    let cancelled = false;
    const cont = openStreamOf([TOKEN("c"), DONE]);
    const cancel = cont.reader.cancel.bind(cont.reader);
    cont.reader.cancel = async (reason?: unknown) => {
      cancelled = true;
      return cancel(reason);
    };
    let relay: SseRelay | undefined;
    const r = new ScriptedRecovery(async () => {
      relay!.cancel(); // the transport's cancel() while the recovery awaits its target
      return cont;
    });
    relay = new SseRelay(x, openStreamOf([TOKEN("a"), new Error("socket closed")]), r);
    expect(dec.decode((await relay.next())![0])).toBe(TOKEN("a"));
    expect(await relay.next()).toEqual([]);
    expect(relay.over).toBe(true);
    expect(cancelled).toBe(true);
    expect(x.log).toEqual(["end fault truncated", "end neutral", "finish cancelled"]);
  });

  test("evict() breaks the stream as drained: not the engine's fault", async () => {
    const x = owner();
    const r = new ScriptedRecovery(async () => openStreamOf([TOKEN("b"), DONE]));
    const stalled = openStreamOf([TOKEN("a"), HANG]);
    const relay = new SseRelay(x, stalled, r);
    const first = await relay.next();
    expect(dec.decode(first![0])).toBe(TOKEN("a"));
    setTimeout(() => r.stream!.evict(), 10);
    const rest = await run(relay);
    expect(rest).toBe(TOKEN("b") + DONE);
    expect(r.causes).toEqual(["drained"]);
    expect(x.log).toEqual(["end neutral", "end neutral", "finish ok"]);
  });
});
