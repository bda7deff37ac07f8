/** A bench's progress on stderr: rewritten in place on a terminal, a line every 5 s otherwise; a final line always. */

const EVERY_MS = 5_000;

export function progressPrinter(): (line: string, final: boolean) => void {
  const tty = process.stderr.isTTY === true;
  let lastAt = 0;
  return (line, final) => {
    if (tty) {
      process.stderr.write(`\r\u001b[K${line}${final ? "\n" : ""}`);
      return;
    }
    const now = performance.now();
    if (!final && now - lastAt < EVERY_MS) return;
    lastAt = now;
    process.stderr.write(`${line}\n`);
  };
}
