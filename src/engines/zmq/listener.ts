/** The binding side of a ZMQ socket: a Bun TCP listener whose every accepted connection speaks ZMTP. PUB and ROUTER sit on it. */
import type { Socket, TCPSocketListener } from "bun";
import { ZmtpConnection, type ZmtpConnectionHandlers, type ZmtpConnectionOptions } from "./connection.ts";
import { formatTcpEndpoint, parseTcpEndpoint, type TcpEndpoint } from "./endpoint.ts";

interface SocketState {
  conn?: ZmtpConnection;
}

export class ZmtpListener {
  private readonly server: TCPSocketListener<SocketState>;
  private readonly conns = new Set<ZmtpConnection>();
  private readonly bound: TcpEndpoint;
  private refused = 0;

  /** Bind now; throws if the address is taken or not a tcp:// endpoint. `maxConnections`: connections past it are closed at once (many peers must not grow us without bound). */
  constructor(endpoint: string, options: ZmtpConnectionOptions, handlers: ZmtpConnectionHandlers, maxConnections = Number.POSITIVE_INFINITY) {
    const { host, port } = parseTcpEndpoint(endpoint);
    const conns = this.conns;
    const refuse = (): void => {
      this.refused++;
    };
    const tracked: ZmtpConnectionHandlers = {
      ready: (c) => handlers.ready(c),
      message: (c, frames) => handlers.message(c, frames),
      subscription: (c, sub, topic) => handlers.subscription(c, sub, topic),
      closed: (c, reason, detail) => {
        conns.delete(c);
        handlers.closed(c, reason, detail);
      },
    };
    this.server = Bun.listen<SocketState>({
      hostname: host,
      port,
      data: {},
      socket: {
        binaryType: "uint8array",
        open(socket: Socket<SocketState>) {
          if (conns.size >= maxConnections) {
            refuse();
            socket.end();
            return;
          }
          socket.setNoDelay(true);
          const conn = new ZmtpConnection(socket, options, tracked);
          socket.data = { conn };
          conns.add(conn);
        },
        data(socket, chunk) {
          socket.data.conn?.receive(chunk);
        },
        drain(socket) {
          socket.data.conn?.drain();
        },
        close(socket) {
          socket.data.conn?.transportClosed();
        },
        error(socket, err) {
          socket.data.conn?.close("connection-lost", err.message);
        },
      },
    });
    this.bound = { host, port: this.server.port };
  }

  /** The bound port (the kernel's choice when the endpoint asked for 0 or `*`). */
  get port(): number {
    return this.bound.port;
  }

  /** `tcp://host:port` as bound; a wildcard bind reads `tcp://0.0.0.0:port`. */
  get endpoint(): string {
    return formatTcpEndpoint(this.bound.host, this.bound.port);
  }

  /** Connections accepted and not yet closed, handshaken or not. */
  get connections(): ReadonlySet<ZmtpConnection> {
    return this.conns;
  }

  /** Connections closed on arrival because `maxConnections` were open. */
  get refusedConnections(): number {
    return this.refused;
  }

  /** Stop accepting and close every connection. */
  close(): void {
    this.server.stop(true);
    for (const c of [...this.conns]) c.close("closed-locally");
  }
}
