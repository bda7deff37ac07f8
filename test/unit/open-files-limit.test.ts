import { describe, expect, test } from "bun:test";
import { fdsNeeded, openFilesAtStart, openFilesVerdict, parseOpenFilesLimit, streamsTheLimitHolds } from "../../src/shared/open-files-limit.ts";

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max processes             unlimited            unlimited            processes
Max open files            1024                 524288               files
Max locked memory         8388608              8388608              bytes
`;

describe("open files limit", () => {
  test("read from /proc/PID/limits; unlimited is Infinity; a missing row is unknown, not zero", () => {
    expect(parseOpenFilesLimit(LIMITS)).toEqual({ soft: 1024, hard: 524288 });
    expect(parseOpenFilesLimit("Max open files            unlimited            unlimited            files")).toEqual({ soft: Infinity, hard: Infinity });
    expect(parseOpenFilesLimit("Max processes 10 10 processes")).toBeUndefined();
  });

  test("two sockets per stream plus a reserve; a warning names the remedy", () => {
    expect(fdsNeeded(10_000)).toBe(20_256);
    expect(openFilesVerdict({ soft: 65536, hard: 65536 }, 10_000)).toEqual({
      level: "info",
      msg: "open files limit",
      fields: { soft: 65536, hard: 65536, needed: 20_256, maxOpenStreams: 10_000 },
    });
    const low = openFilesVerdict({ soft: 20_000, hard: 20_000 }, 10_000);
    expect(low.level).toBe("warn");
    expect(low.msg).toBe(
      "open files: the hard limit 20000 cannot hold max_open_streams 10000 (2 sockets each + 256 = 20256); raise LimitNOFILE= in the systemd unit, or the hard limit as root (ulimit -Hn), or lower max_open_streams",
    );
    const soft = openFilesVerdict({ soft: 1024, hard: 524288 }, 10_000);
    expect(soft.level).toBe("warn");
    expect(soft.msg).toContain("the soft limit 1024 is below the 20256");
    expect(openFilesVerdict({ soft: Infinity, hard: Infinity }, 10_000).fields).toMatchObject({ soft: "unlimited", hard: "unlimited" });
    expect(openFilesVerdict(undefined, 10).fields).toMatchObject({ soft: null, hard: null });
    expect(openFilesVerdict(undefined, 10).level).toBe("info");
  });

  test("an unset max_open_streams is sized to the hard limit without a warning; one the operator set is checked", () => {
    expect(streamsTheLimitHolds({ soft: 20_000, hard: 20_000 }, 10_000)).toBe(9_872);
    expect(streamsTheLimitHolds({ soft: 65536, hard: 65536 }, 10_000)).toBe(10_000);
    expect(streamsTheLimitHolds({ soft: Infinity, hard: Infinity }, 10_000)).toBe(10_000);
    expect(streamsTheLimitHolds(undefined, 10_000)).toBe(10_000);
    expect(streamsTheLimitHolds({ soft: 100, hard: 100 }, 10_000)).toBe(1);
    const sized = openFilesAtStart({ soft: 20_000, hard: 20_000 }, undefined, 10_000);
    expect(sized).toMatchObject({ level: "info", maxOpenStreams: 9_872, fields: { needed: 20_000, maxOpenStreams: 9_872 } });
    expect(sized.msg).toBe("open files limit: max_open_streams not set, sized to 9872 (what the hard limit 20000 holds; the default is 10000)");
    expect(openFilesAtStart({ soft: 65536, hard: 65536 }, undefined, 10_000)).toMatchObject({ level: "info", msg: "open files limit", maxOpenStreams: 10_000 });
    // The operator's own figure: warned about as before.
    expect(openFilesAtStart({ soft: 20_000, hard: 20_000 }, 10_000, 10_000)).toMatchObject({ level: "warn", maxOpenStreams: 10_000 });
    // A soft limit below what the sized figure needs still says to start through the launcher.
    expect(openFilesAtStart({ soft: 1024, hard: 524288 }, undefined, 10_000).level).toBe("warn");
  });
});
