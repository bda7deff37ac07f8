/**
 * CSV as RFC 4180 writes it: fields separated by commas, records by CRLF
 * (or a bare LF), a field in double quotes may hold commas, line breaks and
 * quotes doubled (`""`); a leading byte-order mark is dropped. One pass over
 * the text, so hostile input (an unterminated quote, a record megabytes
 * long) ends in a CsvError naming its line instead of a hang. Pure.
 */

/** A record longer than this is refused: no trace row comes near it, and an unterminated quote would otherwise swallow the file. */
export const MAX_CSV_RECORD_CHARS = 64 * 1024;

export class CsvError extends Error {
  constructor(
    /** 1-based line of the text where the failing record (or field) starts. */
    readonly line: number,
    readonly detail: string,
  ) {
    super(`line ${line}: ${detail}`);
    this.name = "CsvError";
  }
}

export interface CsvRecord {
  /** 1-based line the record starts on (a quoted line break makes a record span several). */
  line: number;
  fields: string[];
}

const QUOTE = 34; // "
const COMMA = 44; // ,
const CR = 13;
const LF = 10;

/** Every record of `text`; lines with nothing on them are skipped (a trailing newline adds no record). */
export function parseCsv(text: string, maxRecordChars = MAX_CSV_RECORD_CHARS): CsvRecord[] {
  const records: CsvRecord[] = [];
  const n = text.length;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let line = 1;
  while (i < n) {
    const recordLine = line;
    const recordStart = i;
    // A line with nothing on it is no record (RFC 4180 has none; the published traces end with one).
    if (text.charCodeAt(i) === LF) {
      i++;
      line++;
      continue;
    }
    if (text.charCodeAt(i) === CR && text.charCodeAt(i + 1) === LF) {
      i += 2;
      line++;
      continue;
    }
    const fields: string[] = [];
    for (;;) {
      let field: string;
      if (text.charCodeAt(i) === QUOTE) {
        const fieldLine = line;
        let value = "";
        let from = i + 1;
        for (;;) {
          const q = text.indexOf('"', from);
          const end = q < 0 ? n : q;
          // Stop at the cap before reading on, then count the line breaks the quoted text spans.
          if (end - recordStart > maxRecordChars) throw tooLong(recordLine, maxRecordChars, fieldLine);
          for (let k = from; k < end; k++) if (text.charCodeAt(k) === LF) line++;
          if (q < 0) throw new CsvError(fieldLine, "a quoted field is never closed (a '\"' without its closing '\"')");
          value += text.slice(from, q);
          if (text.charCodeAt(q + 1) === QUOTE) {
            value += '"';
            from = q + 2;
            continue;
          }
          i = q + 1;
          break;
        }
        const c = text.charCodeAt(i);
        if (i < n && c !== COMMA && c !== LF && !(c === CR && text.charCodeAt(i + 1) === LF))
          throw new CsvError(line, `unexpected '${text[i]}' after a closing quote (a quote inside a quoted field is written "")`);
        field = value;
      } else {
        let j = i;
        for (; j < n; j++) {
          const c = text.charCodeAt(j);
          if (c === COMMA || c === LF || (c === CR && text.charCodeAt(j + 1) === LF)) break;
          if (c === QUOTE) throw new CsvError(line, 'a quote inside an unquoted field (quote the whole field, and write a quote in it as "")');
          if (j - recordStart >= maxRecordChars) throw tooLong(recordLine, maxRecordChars);
        }
        field = text.slice(i, j);
        i = j;
      }
      fields.push(field);
      if (i - recordStart > maxRecordChars) throw tooLong(recordLine, maxRecordChars);
      const c = text.charCodeAt(i);
      if (c === COMMA) {
        i++;
        continue;
      }
      if (c === CR) i += 2;
      else if (c === LF) i++;
      // Past the end (no final line break) the record ends too.
      line++;
      break;
    }
    records.push({ line: recordLine, fields });
  }
  return records;
}

function tooLong(line: number, max: number, quotedFrom?: number): CsvError {
  const hint = quotedFrom === undefined ? "" : ` (a quoted field opened on line ${quotedFrom} may never be closed)`;
  return new CsvError(line, `a record longer than ${max} characters${hint}`);
}
