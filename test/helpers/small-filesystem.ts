/**
 * A size-limited file system for disk-full tests: a tmpfs mounted on a new
 * directory (needs root, as CI runs). Where it cannot be mounted the test is
 * skipped with the reason — or fails under LLMGW_REQUIRE_SYSTEM_TESTS=1,
 * where .ci/run expects it to run.
 */
import { test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface SmallFs {
  dir: string;
  unmount(): void;
}

/** Mount a tmpfs of `sizeMiB`; a reason string when it cannot be. */
export function mountSmallFs(sizeMiB: number): SmallFs | string {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-small-fs-"));
  const r = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", `size=${sizeMiB}m`, "tmpfs", dir], { stderr: "pipe" });
  if (r.exitCode !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return `cannot mount a ${sizeMiB} MiB tmpfs (${r.stderr.toString().trim() || `exit ${r.exitCode}`}); run as root`;
  }
  return {
    dir,
    unmount() {
      Bun.spawnSync(["umount", "-l", dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The test, or its stand-in where the file system cannot be mounted. */
export function testOnSmallFs(name: string, sizeMiB: number, fn: (fs: SmallFs) => Promise<void>, timeoutMs: number): void {
  const probe = mountSmallFs(1);
  if (typeof probe !== "string") {
    probe.unmount();
    test(
      name,
      async () => {
        const fs = mountSmallFs(sizeMiB);
        if (typeof fs === "string") throw new Error(fs);
        try {
          await fn(fs);
        } finally {
          fs.unmount();
        }
      },
      timeoutMs,
    );
  } else if (process.env.LLMGW_REQUIRE_SYSTEM_TESTS === "1") {
    test(name, () => {
      throw new Error(`${probe} (required under LLMGW_REQUIRE_SYSTEM_TESTS=1)`);
    });
  } else {
    test.skip(`${name} (skipped: ${probe})`, () => {});
  }
}
