/** The trace files' CSV parser: each RFC 4180 case, and hostile input refused with its line, quickly. */
import { describe, expect, test } from "bun:test";
import { parseAzureCsv } from "../../src/bench/replay/azure-trace.ts";
import { CsvError, MAX_CSV_RECORD_CHARS, parseCsv } from "../../src/bench/replay/csv.ts";

const fields = (text: string) => parseCsv(text).map((r) => r.fields);
const lines = (text: string) => parseCsv(text).map((r) => r.line);

describe("RFC 4180", () => {
  test("plain fields, CRLF and LF record ends, with or without a final line break", () => {
    expect(fields("a,b,c\r\n1,2,3\r\n")).toEqual([
      ["a", "b", "c"],
      ["1", "2", "3"],
    ]);
    expect(fields("a,b\n1,2")).toEqual([
      ["a", "b"],
      ["1", "2"],
    ]);
    expect(fields("a,,c,\n")).toEqual([["a", "", "c", ""]]);
  });

  test("a quoted field holds commas, CRLF and LF line breaks, and quotes written twice", () => {
    expect(fields('x,"a,b",y\r\n')).toEqual([["x", "a,b", "y"]]);
    expect(fields('"line 1\r\nline 2","1\n2"\r\nnext,row\r\n')).toEqual([
      ["line 1\r\nline 2", "1\n2"],
      ["next", "row"],
    ]);
    expect(fields('"say ""hi""",""""\n')).toEqual([['say "hi"', '"']]);
    expect(fields('"",x\n')).toEqual([["", "x"]]);
  });

  test("a byte-order mark is dropped; blank lines are no records; a lone CR is data", () => {
    expect(fields("\uFEFFTIMESTAMP,x\n1,2\n")).toEqual([
      ["TIMESTAMP", "x"],
      ["1", "2"],
    ]);
    expect(fields("a\n\n\r\nb\n")).toEqual([["a"], ["b"]]);
    expect(fields("a\rb,c\n")).toEqual([["a\rb", "c"]]);
  });

  test("each record knows the line it starts on, past quoted line breaks", () => {
    expect(lines('h\n"a\nb\nc"\n\nd\n')).toEqual([1, 2, 6]);
  });
});

describe("hostile input", () => {
  test("an unterminated quote is refused at the line that opened it", () => {
    const e = (() => {
      try {
        parseCsv('h\nok\n"never closed,\nmore\nmore\n');
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(CsvError);
    expect((e as CsvError).line).toBe(3);
    expect((e as CsvError).message).toMatch(/line 3: a quoted field is never closed/);
  });

  test("text after a closing quote, and a quote inside an unquoted field, name their line", () => {
    expect(() => parseCsv('a\n"b"c\n')).toThrow(/line 2: unexpected 'c' after a closing quote/);
    expect(() => parseCsv('a\nb"c\n')).toThrow(/line 2: a quote inside an unquoted field/);
  });

  test("a huge line, or an unterminated quote over a huge file, stops at the cap with its line, in linear time", () => {
    const huge = `h\n${"x".repeat(MAX_CSV_RECORD_CHARS + 1)}\n`;
    expect(() => parseCsv(huge)).toThrow(`line 2: a record longer than ${MAX_CSV_RECORD_CHARS} characters`);
    // 32 MB of rows after an opening quote that is never closed: refused at the cap, not read to the end.
    const swallowed = `h\n"${"2023-11-16 18:15:46,1,1\n".repeat(1_400_000)}`;
    const t0 = performance.now();
    expect(() => parseCsv(swallowed)).toThrow(/line 2: a record longer than \d+ characters \(a quoted field opened on line 2 may never be closed\)/);
    // Generous: the cap is hit after 64 KiB; reading all 32 MB would take seconds on a busy host either way.
    expect(performance.now() - t0).toBeLessThan(2_000);
    // An unterminated quote in a short file: the same clear error, not a hang.
    expect(() => parseCsv(`h\n"${"y".repeat(1000)}`)).toThrow(/line 2: a quoted field is never closed/);
  });
});

describe("the Azure trace reader on it", () => {
  test("quoted fields, a BOM and extra columns with commas in them parse; the error keeps the trace's name and line", () => {
    const t = parseAzureCsv(
      '\uFEFF"TIMESTAMP","note",ContextTokens,GeneratedTokens\r\n"2023-11-16 18:15:46.5","a, b",10,2\r\n2023-11-16 18:15:47,"multi\r\nline ""note""",20,3\r\n',
      "t.csv",
    );
    expect(t.requests.map((r) => [r.atMs, r.inputTokens, r.outputTokens])).toEqual([
      [0, 10, 2],
      [500, 20, 3],
    ]);
    expect(() => parseAzureCsv('TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,"12,4\n', "t.csv")).toThrow(
      "t.csv, line 2: a quoted field is never closed",
    );
    // Before, a comma inside quotes split the field: "expected 4 fields, got 5".
    expect(() => parseAzureCsv('TIMESTAMP,n,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,"a,b",12,x\n', "t.csv")).toThrow(
      "t.csv, line 2: GeneratedTokens: expected an integer ≥ 1, got 'x'",
    );
  });
});
