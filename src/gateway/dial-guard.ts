/**
 * The dial deadline. Bun's fetch does not report when its TCP connection is
 * up, so a blackholed engine would hold a request until the headers deadline.
 * Before sending to an endpoint that has not answered recently (no pooled
 * connection is likely to exist), open one TCP connection with the dial
 * deadline; a refused or silent endpoint fails fast as "connect". Endpoints
 * in steady use are never probed.
 */

/** An endpoint that answered within this window skips the probe. */
const RECENT_OK_MS = 1_000;

export class DialGuard {
  private readonly lastOkAt: Float64Array;
  private readonly targets: ({ hostname: string; port: number } | undefined)[];

  /** `slots`: the endpoint table's capacity. */
  constructor(slots: number) {
    this.lastOkAt = new Float64Array(slots);
    this.targets = new Array(slots).fill(undefined);
  }

  /** The endpoint in slot `index` is at `url` (a new endpoint has not answered yet). */
  setTarget(index: number, url: string): void {
    const u = new URL(url);
    this.targets[index] = { hostname: u.hostname.replace(/^\[(.*)\]$/, "$1"), port: Number(u.port || (u.protocol === "https:" ? 443 : 80)) };
    this.lastOkAt[index] = 0;
  }

  markOk(index: number): void {
    this.lastOkAt[index] = performance.now();
  }

  /** Whether the endpoint answered recently enough to skip the probe (the common, synchronous case). */
  isRecent(index: number): boolean {
    return performance.now() - (this.lastOkAt[index] ?? 0) < RECENT_OK_MS;
  }

  /** Resolves when the endpoint accepts a connection (or answered recently); rejects with a message otherwise. */
  async check(index: number, dialMs: number): Promise<void> {
    if (this.isRecent(index)) return;
    const target = this.targets[index];
    if (!target) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let timedOut = false;
    const connect = Bun.connect({
      hostname: target.hostname,
      port: target.port,
      socket: {
        open(socket) {
          socket.end();
        },
        data() {},
        error() {},
      },
    });
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(new Error(`no TCP connection within the dial deadline of ${dialMs} ms`));
      }, dialMs);
    });
    try {
      await Promise.race([connect, deadline]);
      this.markOk(index);
    } catch (err) {
      if (timedOut) {
        void connect.then(
          (s) => s.end(),
          () => {},
        );
      }
      throw err instanceof Error ? err : new Error(String(err));
    } finally {
      clearTimeout(timer);
    }
  }
}
