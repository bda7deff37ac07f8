/**
 * Debian's nginx as a plain reverse proxy for `llmgw bench overhead`: the
 * native reference beside the bare Bun proxy. One worker process (as fair as
 * it gets against single-threaded Bun), keep-alive to the engines, no
 * buffering (SSE). Undefined when nginx is not installed.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { diesWithParent } from "../shared/parent-binding.ts";

export interface NginxProxy {
  url: string;
  /** The worker process serving requests (for CPU figures), if found. */
  workerPid: number | undefined;
  stop(): Promise<void>;
}

const CANDIDATES = ["/usr/sbin/nginx", "/usr/bin/nginx"];

function nginxPath(): string | undefined {
  return CANDIDATES.find((p) => Bun.file(p).size > 0) ?? Bun.which("nginx") ?? undefined;
}

async function freePort(): Promise<number> {
  const s = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(null) });
  const port = s.port!;
  await s.stop(true);
  return port;
}

export async function startNginx(upstreams: readonly string[]): Promise<NginxProxy | undefined> {
  const bin = nginxPath();
  if (!bin) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "llmgw-nginx-"));
  const port = await freePort();
  const servers = upstreams.map((u) => `    server ${new URL(u).host};`).join("\n");
  const conf = `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
daemon off;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream engines {
${servers}
    keepalive 512;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://engines;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 600s;
    }
  }
}
`;
  writeFileSync(join(dir, "nginx.conf"), conf);
  // SIGTERM (nginx's fast shutdown) when the bench dies, even by SIGKILL or a timeout.
  const proc = Bun.spawn(diesWithParent([bin, "-p", dir, "-c", join(dir, "nginx.conf")]), { stdout: "ignore", stderr: "pipe" });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      await fetch(`${url}/health`);
      break;
    } catch {
      if (proc.exitCode !== null) throw new Error(`nginx exited: ${await new Response(proc.stderr).text()}`);
      await Bun.sleep(50);
    }
  }
  let workerPid: number | undefined;
  try {
    const children = (await Bun.file(`/proc/${proc.pid}/task/${proc.pid}/children`).text()).trim().split(/\s+/).map(Number);
    workerPid = children.find((n) => Number.isInteger(n) && n > 0);
  } catch {
    workerPid = undefined;
  }
  return {
    url,
    workerPid,
    async stop() {
      proc.kill("SIGQUIT");
      const t = setTimeout(() => proc.kill("SIGKILL"), 3_000);
      await proc.exited;
      clearTimeout(t);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
