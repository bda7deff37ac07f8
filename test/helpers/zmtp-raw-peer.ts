/**
 * A hand-driven ZMTP peer on a node:net socket, for what a real library peer
 * will not do on request: speak ZMTP 3.0, stop reading (a slow subscriber),
 * stop answering (a dead publisher). Built from the pure codec under test,
 * so it checks the socket layers, not the codec.
 */
import net from "node:net";
import { ByteQueue } from "../../src/engines/zmq/byte-queue.ts";
import { decodeCommand, readyCommand, type ZmtpCommand } from "../../src/engines/zmq/commands.ts";
import { encodeMessage, takeFrame } from "../../src/engines/zmq/frames.ts";
import { encodeGreeting } from "../../src/engines/zmq/greeting.ts";

export interface RawPeerOptions {
  socketType: string;
  /** ZMTP minor version to announce (0 for a 3.0 peer). */
  minor?: number;
  identity?: Uint8Array;
}

export class RawPeer {
  readonly messages: Uint8Array[][] = [];
  readonly commands: ZmtpCommand[] = [];
  private readonly inbound = new ByteQueue();
  private greeted = false;
  private parts: Uint8Array[] = [];
  private readyResolve!: () => void;
  /** Resolves when the other side's READY has arrived. */
  readonly ready = new Promise<void>((r) => (this.readyResolve = r));
  closed = false;

  constructor(
    readonly socket: net.Socket,
    options: RawPeerOptions,
  ) {
    const greeting = encodeGreeting();
    greeting[11] = options.minor ?? 1;
    socket.write(greeting);
    socket.write(readyCommand(options.socketType, options.identity));
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("close", () => (this.closed = true));
    socket.on("error", () => (this.closed = true));
  }

  /** Send a multipart message. */
  send(frames: Uint8Array[]): void {
    this.socket.write(encodeMessage(frames));
  }

  /** Send raw bytes (a command, say). */
  write(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.inbound.push(new Uint8Array(chunk));
    if (!this.greeted) {
      if (this.inbound.length < 64) return;
      this.inbound.skip(64);
      this.greeted = true;
    }
    for (let f = takeFrame(this.inbound, 1 << 26); f; f = takeFrame(this.inbound, 1 << 26)) {
      if (f.command) {
        const cmd = decodeCommand(f.body);
        this.commands.push(cmd);
        if (cmd.name === "READY") this.readyResolve();
        continue;
      }
      this.parts.push(f.body.slice());
      if (!f.more) {
        this.messages.push(this.parts);
        this.parts = [];
      }
    }
  }
}

/** Connect a raw peer to 127.0.0.1:`port`. */
export function dialRaw(port: number, options: RawPeerOptions): Promise<RawPeer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => resolve(new RawPeer(socket, options)));
    socket.once("error", reject);
  });
}

/** Listen on an ephemeral port; every accepted connection becomes a raw peer. */
export async function listenRaw(options: RawPeerOptions): Promise<{ port: number; peers: RawPeer[]; close(): void }> {
  const peers: RawPeer[] = [];
  const server = net.createServer((socket) => peers.push(new RawPeer(socket, options)));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return {
    port: address.port,
    peers,
    close() {
      for (const p of peers) p.close();
      server.close();
    },
  };
}

/** A port nothing listens on right now (bound, then released). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  await new Promise<void>((r) => server.close(() => r()));
  return address.port;
}
