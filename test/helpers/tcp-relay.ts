/**
 * A TCP relay on loopback: what a gateway dials instead of an engine's
 * socket, so a test can break the connection (stop: every connection
 * closed, nothing listening) and bring it back on the same port, as a
 * network path that drops and returns does. Bytes pass unchanged.
 */
import type { Socket, TCPSocketListener } from "bun";

interface Pair {
  peer: Socket<Pair> | undefined;
  pending: Uint8Array[];
}

export class TcpRelay {
  private listener: TCPSocketListener<Pair> | undefined;
  private readonly open = new Set<Socket<Pair>>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listen (again) on `port` (0: any; after a stop, the same one). */
  start(port = this.port): this {
    const relay = this;
    this.listener = Bun.listen<Pair>({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(client) {
          client.data = { peer: undefined, pending: [] };
          relay.open.add(client);
          void Bun.connect<Pair>({
            hostname: relay.targetHost,
            port: relay.targetPort,
            socket: {
              open(upstream) {
                upstream.data = { peer: client, pending: [] };
                relay.open.add(upstream);
                client.data.peer = upstream;
                for (const chunk of client.data.pending) upstream.write(chunk);
                client.data.pending = [];
              },
              data(upstream, chunk) {
                upstream.data.peer?.write(chunk);
              },
              close(upstream) {
                relay.open.delete(upstream);
                upstream.data.peer?.end();
              },
              error(upstream) {
                upstream.data.peer?.end();
              },
            },
          }).catch(() => client.end());
        },
        data(client, chunk) {
          if (client.data.peer) client.data.peer.write(chunk);
          else client.data.pending.push(new Uint8Array(chunk));
        },
        close(client) {
          relay.open.delete(client);
          client.data.peer?.end();
        },
        error(client) {
          client.data.peer?.end();
        },
      },
    });
    this.port = this.listener.port;
    return this;
  }

  get endpoint(): string {
    return `tcp://127.0.0.1:${this.port}`;
  }

  /** Close every connection through it and stop listening. */
  stop(): void {
    this.listener?.stop(true);
    this.listener = undefined;
    for (const s of this.open) s.terminate();
    this.open.clear();
  }
}
