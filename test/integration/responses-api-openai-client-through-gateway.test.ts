/**
 * The Responses API through llmgw with the real `openai` client, over two
 * sim-engine replicas that keep no state (as vLLM without its store): a
 * response streaming and not (usage settled, TTFT at the first delta, the
 * audit line); a two-turn conversation whose second turn is answered by the
 * other replica from the conversation the gateway kept; retrieve,
 * inputItems.list and delete; another tenant's id is a 404 (and a 400 as a
 * previous_response_id); a background response polled to completion and
 * one cancelled; a stream cut after its first events ends with the API's
 * own error and response.failed events where it cannot be continued, and
 * is continued seamlessly on the other replica where it can.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { auditLine, counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const KEY_A = "sk-tenant-a-0000";
const KEY_B = "sk-tenant-b-0000";

let sims: Sim[];
let gw: Gateway;
let a: OpenAI;
let b: OpenAI;
let dataDir: string;

beforeAll(async () => {
  // "m-plain": the same engines, a model whose streams are never continued (the explicit error path).
  const args = ["--model", "m", "--model", "m-plain", "--itl-ms", "2", "--output-len", "12"];
  sims = await Promise.all([startSim(args), startSim(args)]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-responses-"));
  gw = await startGateway(
    {
      data_dir: dataDir,
      health: { poll_interval_ms: 100 },
      circuit_breaker: { failure_threshold: 1000 },
      models: [{ name: "m" }, { name: "m-plain", continuation: false }],
      endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api, models: ["m", "m-plain"] })),
      auth: {
        keys: [
          { key: KEY_A, tenant: "a" },
          { key: KEY_B, tenant: "b" },
        ],
      },
    },
    2,
  );
  a = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: KEY_A, maxRetries: 0 });
  b = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: KEY_B, maxRetries: 0 });
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function caught(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected the SDK to throw");
}

function simOf(endpoint: string | null): Sim {
  return sims[Number(endpoint?.slice("sim-".length))]!;
}

describe("the Responses API through llmgw (openai client)", () => {
  test("a response, not streaming: output_text, usage from input_tokens/output_tokens, the audit line and the route's metrics", async () => {
    const { data: r, response } = await a.responses.create({ model: "m", input: "Tell me about the sea", max_output_tokens: 5 }).withResponse();
    expect(r.object).toBe("response");
    expect(r.id).toMatch(/^resp_/);
    expect(r.status).toBe("incomplete"); // max_output_tokens reached
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.usage!.output_tokens).toBe(5);
    const audit = await auditLine(gw, response.headers.get("x-request-id")!);
    expect(audit.route).toBe("/v1/responses");
    expect(audit.tokens).toEqual({ prompt: r.usage!.input_tokens, completion: 5 });
    expect(counterValue(await gw.metrics(), "llmgw_requests_total", { route: "responses", outcome: "ok" })).toBeGreaterThanOrEqual(1);
  });

  test("a response streaming: the event stream passes untouched, usage comes from response.completed, TTFT is recorded", async () => {
    const before = counterValue(await gw.metrics(), "llmgw_time_to_first_token_seconds_count");
    const stream = await a.responses.create({ model: "m", input: "Count the waves", max_output_tokens: 6, stream: true });
    const types: string[] = [];
    let text = "";
    let completed: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.completed") completed = ev.response;
    }
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    expect(types.filter((t) => t === "response.output_text.delta").length).toBe(6);
    expect(completed!.usage!.output_tokens).toBe(6);
    expect(completed!.output_text ?? (completed!.output[0] as { content: { text: string }[] }).content[0]!.text).toBe(text);
    expect(counterValue(await gw.metrics(), "llmgw_time_to_first_token_seconds_count")).toBe(before + 1);
  });

  test("a two-turn conversation: the second turn, on the other replica, answers the whole conversation the gateway kept", async () => {
    const first = await a.responses.create({ model: "m", input: "My name is Ada. Remember it.", max_output_tokens: 4 }).withResponse();
    const firstSim = simOf(first.response.headers.get("x-llmgw-endpoint"));
    const other = sims.find((s) => s !== firstSim)!;
    // The first replica goes away: the follow-up can only be answered by the other, which never saw turn one.
    await firstSim.configure({ dead: true });
    try {
      const second = await a.responses
        .create({ model: "m", previous_response_id: first.data.id, input: "What is my name?", max_output_tokens: 4 })
        .withResponse();
      expect(simOf(second.response.headers.get("x-llmgw-endpoint"))).toBe(other);
      // The engine was sent the conversation, not the id; the stored response says what the client asked.
      expect((await a.responses.retrieve(second.data.id)).previous_response_id).toBe(first.data.id);
      // What the other replica answers when sent the whole conversation itself:
      const direct = await fetch(`${other.api}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "m",
          max_output_tokens: 4,
          input: [{ role: "user", content: "My name is Ada. Remember it." }, ...first.data.output, { role: "user", content: "What is my name?" }],
        }),
      });
      const expected = (await direct.json()) as { output: { content: { text: string }[] }[]; usage: { input_tokens: number } };
      expect(second.data.output_text).toBe(expected.output[0]!.content[0]!.text);
      expect(second.data.usage!.input_tokens).toBe(expected.usage.input_tokens);
    } finally {
      await firstSim.configure({ dead: false });
    }
  });

  test("retrieve, inputItems.list and delete work as OpenAI documents them", async () => {
    const r = await a.responses.create({
      model: "m",
      input: [
        { role: "user", content: "one" },
        { role: "user", content: [{ type: "input_text", text: "two" }] },
      ],
      max_output_tokens: 3,
    });
    const got = await a.responses.retrieve(r.id);
    expect(got.id).toBe(r.id);
    expect(got.output_text).toBe(r.output_text);
    const items = [];
    for await (const item of a.responses.inputItems.list(r.id)) items.push(item);
    expect(items.length).toBe(2);
    const texts = items.map((i) => (i as { content: { text: string }[] }).content[0]!.text);
    expect(texts).toEqual(["two", "one"]); // newest first, OpenAI's default order
    expect(items.every((i) => typeof i.id === "string" && i.id.startsWith("msg_"))).toBe(true);
    const asc = await a.responses.inputItems.list(r.id, { order: "asc", limit: 1 });
    expect(asc.data.map((i) => (i as { content: { text: string }[] }).content[0]!.text)).toEqual(["one"]);
    expect(asc.has_more).toBe(true);
    await a.responses.delete(r.id);
    expect(await caught(a.responses.retrieve(r.id))).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test("another tenant's response id is a 404, and a 400 previous_response_not_found as a follow-up", async () => {
    const r = await a.responses.create({ model: "m", input: "private", max_output_tokens: 2 });
    const err = await caught(b.responses.retrieve(r.id));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await caught(b.responses.delete(r.id))).toBeInstanceOf(OpenAI.NotFoundError);
    const followUp = (await caught(b.responses.create({ model: "m", previous_response_id: r.id, input: "and?" }))) as InstanceType<
      typeof OpenAI.BadRequestError
    >;
    expect(followUp).toBeInstanceOf(OpenAI.BadRequestError);
    expect(followUp.code).toBe("PREVIOUS_RESPONSE_NOT_FOUND");
    expect(followUp.param).toBe("previous_response_id");
    expect(followUp.message).toContain(`Previous response with id '${r.id}' not found.`);
    // Still there for its own tenant.
    expect((await a.responses.retrieve(r.id)).id).toBe(r.id);
  });

  test("a background response is queued at once, polled to completion, and a follow-up can build on it", async () => {
    const queued = await a.responses.create({ model: "m", input: "Write slowly", max_output_tokens: 8, background: true });
    expect(queued.status).toBe("queued");
    expect(queued.background).toBe(true);
    const done = await waitUntil(
      async () => {
        const r = await a.responses.retrieve(queued.id);
        return r.status === "queued" || r.status === "in_progress" ? undefined : r;
      },
      { what: "the background response to finish" },
    );
    expect(done.id).toBe(queued.id);
    expect(done.status).toBe("incomplete");
    expect(done.output_text.length).toBeGreaterThan(0);
    expect(done.usage!.output_tokens).toBe(8);
    const next = await a.responses.create({ model: "m", previous_response_id: queued.id, input: "Go on", max_output_tokens: 2 });
    expect(next.usage!.input_tokens).toBeGreaterThan(done.usage!.input_tokens);
  });

  test("a running background response is cancelled and stays cancelled; a finished one cannot be cancelled back", async () => {
    const slow = await a.responses.create({ model: "m", input: "A long essay", max_output_tokens: 3000, background: true });
    await waitUntil(async () => (await a.responses.retrieve(slow.id)).status === "in_progress", { what: "the run to start" });
    const cancelled = await a.responses.cancel(slow.id);
    expect(cancelled.status).toBe("cancelled");
    await Bun.sleep(300);
    expect((await a.responses.retrieve(slow.id)).status).toBe("cancelled");
    const plain = await a.responses.create({ model: "m", input: "not background", max_output_tokens: 2 });
    expect(await caught(a.responses.cancel(plain.id))).toBeInstanceOf(OpenAI.BadRequestError);
  });

  test("a stream cut after its first events ends with the API's error and response.failed events, never a clean end", async () => {
    await Promise.all(sims.map((s) => s.configure({ fault_rate: 1, fault_types: ["cut:3"] })));
    try {
      const { data: stream, response } = await a.responses
        .create({ model: "m-plain", input: "Break here", max_output_tokens: 10, stream: true })
        .withResponse();
      const events: { type: string; [k: string]: unknown }[] = [];
      for await (const ev of stream) events.push(ev as unknown as { type: string });
      const types = events.map((e) => e.type);
      expect(types[0]).toBe("response.created");
      expect(types.filter((t) => t === "response.output_text.delta").length).toBe(3);
      expect(types).not.toContain("response.completed");
      expect(types.slice(-2)).toEqual(["error", "response.failed"]);
      const failed = events.at(-1) as unknown as { response: { id: string; status: string; error: { code: string } } };
      expect(failed.response.status).toBe("failed");
      expect(failed.response.error.code).toBe("UPSTREAM_STREAM_TRUNCATED");
      expect(failed.response.id).toBe((events[0] as unknown as { response: { id: string } }).response.id);
      // A failed answer is not stored.
      expect(await caught(a.responses.retrieve(failed.response.id))).toBeInstanceOf(OpenAI.NotFoundError);
      const audit = await auditLine(gw, response.headers.get("x-request-id")!);
      expect(audit.outcome).toBe("stream_error");
    } finally {
      await Promise.all(sims.map((s) => s.configure({ fault_rate: 0, fault_types: [] })));
    }
  });
});

describe("a broken Responses stream continued on the other replica", () => {
  test("the client reads one whole stream, the text and usage of the unbroken answer, its events numbered in order", async () => {
    const [faulty, healthy] = sims as [Sim, Sim];
    await faulty.configure({ fault_rate: 1, fault_types: ["cut:3"] });
    try {
      let recovered = 0;
      for (let i = 0; i < 20 && recovered < 2; i++) {
        const body = { model: "m", input: [{ role: "user", content: `Tell story ${i}` }], max_output_tokens: 10, stream: true };
        const direct = await fetch(`${healthy.api}/v1/responses`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        const reference = (await direct.text()).split("\n\n").filter((e) => e.includes("response.completed"))[0]!;
        const expected = JSON.parse(reference.slice(reference.indexOf("data:") + 5)) as {
          response: { output: { content: { text: string }[] }[]; usage: { input_tokens: number; output_tokens: number } };
        };
        const { data: stream, response } = await a.responses.create(body as OpenAI.Responses.ResponseCreateParamsStreaming).withResponse();
        const events: { type: string; sequence_number: number; delta?: string; response?: OpenAI.Responses.Response }[] = [];
        for await (const ev of stream) events.push(ev as unknown as (typeof events)[number]);
        const types = events.map((e) => e.type);
        expect(types.filter((t) => t === "response.created").length).toBe(1);
        expect(types.at(-1)).toBe("response.completed");
        expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, k) => k));
        const text = events
          .filter((e) => e.type === "response.output_text.delta")
          .map((e) => e.delta)
          .join("");
        const final = events.at(-1)!.response!;
        expect(text).toBe(expected.response.output[0]!.content[0]!.text);
        expect((final.output[0] as { content: { text: string }[] }).content[0]!.text).toBe(text);
        expect(final.id).toBe((events[0] as unknown as { response: { id: string } }).response.id);
        expect(final.usage!.input_tokens).toBe(expected.response.usage.input_tokens);
        expect(final.usage!.output_tokens).toBe(expected.response.usage.output_tokens);
        const audit = await auditLine(gw, response.headers.get("x-request-id")!);
        const notes = (audit.recoveries as { result: string }[] | null) ?? [];
        if (notes.length > 0) {
          expect(notes[0]!.result).toBe("recovered");
          expect((audit.tokens as { completion: number }).completion).toBe(expected.response.usage.output_tokens);
          // The stored response is the whole answer too.
          expect((await a.responses.retrieve(final.id)).output_text).toBe(text);
          recovered++;
        }
      }
      expect(recovered).toBeGreaterThan(0);
    } finally {
      await faulty.configure({ fault_rate: 0, fault_types: [] });
    }
  });
});

describe("a follow-up whose stored state has expired", () => {
  test("gets 400 PREVIOUS_RESPONSE_NOT_FOUND, and the response itself a 404", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-responses-ttl-"));
    try {
      const short = await startGateway({ data_dir: dir, responses: { store_ttl_s: 1 }, endpoints: [{ id: "sim-0", url: sims[0]!.api, models: ["m"] }] }, 1);
      const client = new OpenAI({ baseURL: `${short.api}/v1`, apiKey: "none", maxRetries: 0 });
      const r = await client.responses.create({ model: "m", input: "soon gone", max_output_tokens: 2 });
      expect((await client.responses.retrieve(r.id)).id).toBe(r.id);
      await Bun.sleep(1_200);
      const err = (await caught(client.responses.create({ model: "m", previous_response_id: r.id, input: "still there?" }))) as InstanceType<
        typeof OpenAI.BadRequestError
      >;
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.code).toBe("PREVIOUS_RESPONSE_NOT_FOUND");
      expect(await caught(client.responses.retrieve(r.id))).toBeInstanceOf(OpenAI.NotFoundError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
