/** ZMQ TCP endpoints as libzmq spells them: `tcp://host:port`, `tcp://*:port` to bind every interface, `tcp://[::1]:port`, port `*` or 0 for an ephemeral one. Pure. */

export interface TcpEndpoint {
  /** Host name or address, without IPv6 brackets; "0.0.0.0" for `*`. */
  host: string;
  /** 0 asks the kernel for a free port (bind only). */
  port: number;
}

/** Parse a `tcp://` endpoint; throws with the endpoint in the message when it is not one. */
export function parseTcpEndpoint(endpoint: string): TcpEndpoint {
  const m = /^tcp:\/\/(\[[0-9a-fA-F:.]+\]|[^:/\s[\]]+):(\*|\d{1,5})$/.exec(endpoint);
  if (!m) throw new Error(`not a ZMQ TCP endpoint: ${JSON.stringify(endpoint)} (expected tcp://host:port)`);
  const rawHost = m[1]!;
  const host = rawHost === "*" ? "0.0.0.0" : rawHost.startsWith("[") ? rawHost.slice(1, -1) : rawHost;
  const port = m[2] === "*" ? 0 : Number(m[2]);
  if (port > 65535) throw new Error(`port out of range in ${JSON.stringify(endpoint)}`);
  return { host, port };
}

export function formatTcpEndpoint(host: string, port: number): string {
  return `tcp://${host.includes(":") ? `[${host}]` : host}:${port}`;
}
