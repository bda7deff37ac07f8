/**
 * The floor of our runtime for `llmgw bench overhead`: the least a Bun proxy
 * can do — fetch the upstream (round-robin) and return its body. No parsing,
 * no deadlines, no retries, no metrics.
 * Usage: bun src/bench/bare-proxy.ts <port> <upstream-url>...
 * Like every child of a bench, it stops when the bench does (LLMGW_PARENT_PID),
 * even one killed by a timeout.
 */
import { bindToParent } from "../shared/parent-binding.ts";

bindToParent();
const [portArg, ...upstreams] = process.argv.slice(2);
let next = 0;
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: Number(portArg ?? 0),
  idleTimeout: 0,
  async fetch(req) {
    const upstream = upstreams[next++ % upstreams.length]!;
    const res = await fetch(upstream + new URL(req.url).pathname, { method: req.method, headers: req.headers, body: req.body, signal: req.signal });
    const headers = new Headers(res.headers);
    headers.delete("content-encoding");
    headers.delete("content-length");
    return new Response(res.body, { status: res.status, headers });
  },
});
console.log(JSON.stringify({ msg: "listening", name: "api", url: `http://127.0.0.1:${server.port}` }));
