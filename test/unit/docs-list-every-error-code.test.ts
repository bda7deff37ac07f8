/**
 * docs/errors.md lists every error code of src/shared/errors.ts, each in a
 * row with the HTTP status the code maps to, and no code that does not exist.
 * The codes are read from the ErrorCode union's source, the statuses from
 * describeCode(), the one switch the servers answer with.
 */
import { describe, expect, test } from "bun:test";
import { describeCode, type ErrorCode } from "../../src/shared/errors.ts";
import { proseLines, readPage } from "../helpers/docs.ts";

const PAGE = "docs/errors.md";

function errorCodes(): ErrorCode[] {
  const source = readPage("src/shared/errors.ts");
  const union = /export type ErrorCode =([\s\S]*?);/.exec(source);
  if (!union) throw new Error("no `export type ErrorCode = …;` in src/shared/errors.ts");
  const codes = [...union[1]!.replace(/\/\/.*$/gm, "").matchAll(/"([A-Z0-9_]+)"/g)].map((m) => m[1]! as ErrorCode);
  return codes;
}

/** Rows of the page's tables whose first cell is an HTTP status: status → the backticked codes in the row's second cell. */
function tableRows(text: string): { status: number; codes: string[] }[] {
  const rows: { status: number; codes: string[] }[] = [];
  for (const line of proseLines(text)) {
    const cells = line.split("|").map((c) => c.trim());
    if (cells.length < 4 || cells[0] !== "") continue;
    if (!/^\d{3}$/.test(cells[1]!)) continue;
    rows.push({ status: Number(cells[1]), codes: [...cells[2]!.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1]!) });
  }
  return rows;
}

describe("the error-code table", () => {
  const codes = errorCodes();
  const rows = tableRows(readPage(PAGE));

  test("the codes are read from errors.ts", () => {
    expect(codes.length).toBeGreaterThan(30);
    expect(codes).toContain("INVALID_API_KEY");
    expect(codes).toContain("STALE_FENCING_TOKEN");
  });

  test("a missing code or a wrong status is caught", () => {
    const sample = tableRows("| status | code | when |\n| --- | --- | --- |\n| 401 | `INVALID_API_KEY` | no key |\n| 500 | `RATE_LIMITED` | wrong |\n");
    expect(sample).toEqual([
      { status: 401, codes: ["INVALID_API_KEY"] },
      { status: 500, codes: ["RATE_LIMITED"] },
    ]);
    const listedWith = (code: string, status: number) => sample.some((r) => r.status === status && r.codes.includes(code));
    expect(listedWith("INVALID_API_KEY", describeCode("INVALID_API_KEY").status)).toBe(true);
    expect(listedWith("RATE_LIMITED", describeCode("RATE_LIMITED").status)).toBe(false);
    expect(listedWith("METRICS_NOT_READY", describeCode("METRICS_NOT_READY").status)).toBe(false);
  });

  for (const code of errorCodes()) {
    const { status } = describeCode(code);
    test(`${code} is listed with ${status}`, () => {
      const where = rows.filter((r) => r.codes.includes(code)).map((r) => r.status);
      expect(where).toEqual([status]);
    });
  }

  test("every code in the table exists", () => {
    const unknown = rows.flatMap((r) => r.codes).filter((c) => !codes.includes(c as ErrorCode));
    expect(unknown).toEqual([]);
  });
});
