/**
 * Graceful shutdown: resolves on the first SIGINT, SIGTERM or SIGHUP (or the
 * signals given) and keeps the handlers installed, so a second signal (npm
 * and terminals often send more than one) does not kill the process
 * mid-shutdown and orphan what it was about to stop.
 */
export function shutdownSignal(
  onSignal: (signal: NodeJS.Signals) => void = () => {},
  signals: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"],
): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let first = true;
    for (const sig of signals) {
      process.on(sig, () => {
        if (!first) return;
        first = false;
        onSignal(sig);
        resolve(sig);
      });
    }
  });
}
