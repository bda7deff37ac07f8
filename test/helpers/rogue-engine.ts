/**
 * A hand-written engine on loopback, for the answers the sim-engine will not
 * give (per-model rate limits, half-sent bodies, answers of hundreds of MB):
 * healthy on /health, `models` on /v1/models, no /metrics (404, like a
 * hosted API), and every other request handed to `answer`.
 */
import type { Server } from "bun";

type ModelCard = { id: string } & Record<string, unknown>;

export function startRogueEngine(
  models: readonly (string | ModelCard)[],
  answer: (req: Request, path: string) => Response | Promise<Response>,
): Server<undefined> {
  const data = models.map((m) => (typeof m === "string" ? { id: m, object: "model" } : { object: "model", ...m }));
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/health") return new Response("");
      if (path === "/v1/models") return Response.json({ object: "list", data });
      if (path === "/metrics") return new Response("", { status: 404 });
      return answer(req, path);
    },
  });
}
