/**
 * The floor of our runtime for `llmgw bench overhead`: the least a Bun proxy
 * can do — fetch the upstream (round-robin) and return its body. No parsing,
 * no deadlines, no retries, no metrics.
 *
 * With `--relay`, the floor of a relay that sees its bytes: the same, except
 * that the answer's body goes through JavaScript as llmgw's relay writes it —
 * every buffered upstream chunk read in one call, written to Bun's direct
 * stream and flushed, the stream closed at the end. It looks at nothing.
 * What it costs over the plain floor is what any gateway on Bun pays to
 * observe a stream (first token, usage, a break); what llmgw costs over it
 * is llmgw's own work.
 *
 * With `--http1`, the same relay with the upstream reached as llmgw reaches
 * a streaming engine: through its HTTP/1.1 client (gateway/proxy/
 * http1-client.ts) instead of fetch. Side by side with `--relay`, the two
 * designs of the upstream leg.
 *
 * Usage: bun src/bench/bare-proxy.ts <port> [--relay | --http1] <upstream-url>...
 * Like every child of a bench, it stops when the bench does (LLMGW_PARENT_PID),
 * even one killed by a timeout.
 */
import { type BodyReader, defaultReader } from "../gateway/proxy/body-reader.ts";
import { http1 } from "../gateway/proxy/http1-client.ts";
import { bindToParent } from "../shared/parent-binding.ts";

bindToParent();
const [portArg, ...rest] = process.argv.slice(2);
const mode = rest[0] === "--relay" || rest[0] === "--http1" ? rest[0] : "";
const upstreams = mode === "" ? rest : rest.slice(1);
let next = 0;

/** The upstream body, each burst of chunks written by JavaScript to the client's direct stream. */
function relayed(reader: BodyReader): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    type: "direct",
    async pull(controller) {
      try {
        for (;;) {
          const got = reader.readMany();
          const r = got instanceof Promise ? await got : got;
          for (const chunk of r.value) {
            const w = controller.write(chunk);
            if (w instanceof Promise) await w;
          }
          if (r.done) break;
          controller.flush();
        }
        controller.close();
      } catch {
        void reader.cancel().catch(() => {});
      }
    },
    cancel() {
      void reader.cancel().catch(() => {});
    },
  });
}

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: Number(portArg ?? 0),
  idleTimeout: 0,
  async fetch(req) {
    const upstream = upstreams[next++ % upstreams.length]!;
    if (mode === "--http1") {
      const a = await http1.post(upstream + new URL(req.url).pathname, {
        headers: { "content-type": "application/json" },
        body: await req.bytes(),
        signal: req.signal,
      });
      const type = a.header("content-type");
      return new Response(a.body ? relayed(a.body) : null, { status: a.status, headers: type === null ? {} : { "content-type": type } });
    }
    const res = await fetch(upstream + new URL(req.url).pathname, { method: req.method, headers: req.headers, body: req.body, signal: req.signal });
    const headers = new Headers(res.headers);
    headers.delete("content-encoding");
    headers.delete("content-length");
    return new Response(mode === "--relay" && res.body ? relayed(defaultReader(res.body)) : res.body, { status: res.status, headers });
  },
});
console.log(JSON.stringify({ msg: "listening", name: "api", url: `http://127.0.0.1:${server.port}` }));
