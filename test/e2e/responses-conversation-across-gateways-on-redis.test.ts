/**
 * Conversation state shared by several gateways (state.backend: redis): a
 * response created through one gateway is continued, read, listed and
 * deleted through another — the stateless engines behind them never see an
 * id, only the conversation — and a background response created on one is
 * polled to completion on the other. With the real `openai` client and a
 * real redis-server.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { startSim } from "../helpers/cluster.ts";
import { type ClusterGateway, startGatewayCluster } from "../helpers/gateway-cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

/** The SDK's promises are already settled Promise objects (their outcome comes through then()), so they are awaited, not handed to expect().rejects. */
async function caught(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected the SDK to throw");
}

describeWithRedis("Responses API state across gateways on Redis", () => {
  let gws: ClusterGateway[];
  let one: OpenAI;
  let two: OpenAI;

  beforeAll(async () => {
    const redis = await startRedisServer();
    const sims = await Promise.all([0, 1].map(() => startSim(["--model", "m", "--itl-ms", "2", "--output-len", "12"])));
    gws = await startGatewayCluster(
      redis,
      2,
      { log_level: "warn", endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api, models: ["m"] })) },
      { readyEndpoints: 2 },
    );
    [one, two] = gws.map((g) => new OpenAI({ baseURL: `${g.api}/v1`, apiKey: "none", maxRetries: 0 })) as [OpenAI, OpenAI];
  });

  afterAll(async () => {
    await stopAll();
    await stopRedisServers();
  });

  test("a follow-up through the other gateway is expanded from the shared store; retrieve, input items and delete there too", async () => {
    const first = await one.responses.create({ model: "m", input: "Remember: the password is swordfish.", max_output_tokens: 4 });
    const second = await two.responses.create({ model: "m", previous_response_id: first.id, input: "What is the password?", max_output_tokens: 4 });
    // The second turn's prompt held the first turn and its answer.
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + first.usage!.output_tokens);
    expect((await two.responses.retrieve(first.id)).output_text).toBe(first.output_text);
    const items = await two.responses.inputItems.list(second.id);
    expect(items.data.map((i) => (i as { content: { text: string }[] }).content[0]!.text)).toEqual(["What is the password?"]);
    await two.responses.delete(first.id);
    expect(await caught(one.responses.retrieve(first.id))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await caught(one.responses.create({ model: "m", previous_response_id: first.id, input: "again?" }))).toBeInstanceOf(OpenAI.BadRequestError);
  });

  test("a background response created on one gateway is polled to completion on the other", async () => {
    const queued = await one.responses.create({ model: "m", input: "In the background", max_output_tokens: 6, background: true });
    const done = await waitUntil(
      async () => {
        const r = await two.responses.retrieve(queued.id);
        return r.status === "queued" || r.status === "in_progress" ? undefined : r;
      },
      { what: "the background response" },
    );
    expect(done.status).toBe("incomplete");
    expect(done.usage!.output_tokens).toBe(6);
  });
});
