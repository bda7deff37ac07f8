/** The one rule for the model and adapter names llmgw accepts (config, management API, node agent, engines' /v1/models), and a name's form in a response header. */

/**
 * The longest name, in code points. Hugging Face ids are at most 96
 * characters (owner/name); vLLM's served model name may be a local path,
 * which this leaves room for.
 */
const MODEL_NAME_MAX_CHARS = 256;

/**
 * Every code point a name may not hold: Unicode's "Other" categories —
 * controls (NUL, DEL, C1), format characters (the bidi overrides and
 * isolates U+202A–202E and U+2066–2069 that make a name read as another,
 * zero-width joiners and spaces, BOM), lone surrogates, private use and
 * unassigned code points — and every separator (line and paragraph
 * separators, and every space but U+0020, which stays out of the ends
 * only: vLLM serves a local path such as "/models/llama 8b" under that
 * name). Letters, marks, digits, punctuation and symbols of any script stay
 * allowed: vLLM takes any string as a served model name or a LoRA adapter
 * name, and a local model path may be in any language.
 */
const REFUSED = /[[\p{C}\p{Z}]--[\x20]]/v;

/** Why `name` is not a model or adapter name llmgw accepts, or undefined when it is one. */
export function modelNameProblem(name: string): string | undefined {
  if (name.length === 0) return "is empty";
  const bad = REFUSED.exec(name);
  if (bad) return `contains ${codePointLabel(bad[0])}, a control, format or separator character (names are printable)`;
  if (name.startsWith(" ") || name.endsWith(" ")) return "starts or ends with a space";
  // Counted after the check: a lone surrogate was refused above, so every pair here is one code point.
  let chars = 0;
  for (const _ of name) chars++;
  if (chars > MODEL_NAME_MAX_CHARS) return `is ${chars} characters long (at most ${MODEL_NAME_MAX_CHARS})`;
  return undefined;
}

/** `name` quoted for an error message or a log, every refused code point written as \u{…} so it cannot reorder or hide the text around it. */
export function quotedName(name: string): string {
  const shown = name.length > 80 ? `${name.slice(0, 80)}…` : name;
  return `'${shown.replace(/[[\p{C}\p{Z}]--[\x20]]/gv, (ch) => `\\u{${(ch.codePointAt(0) ?? 0).toString(16)}}`)}'`;
}

/** `U+202E`: a code point as people look it up. */
function codePointLabel(ch: string): string {
  return `U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}`;
}

const utf8 = new TextEncoder();

/**
 * A name as an HTTP header value that cannot be refused. RFC 9110 §5.5 lets
 * a field value carry visible ASCII; Bun (like fetch's Headers) throws on
 * anything above U+00FF, and bytes 0x80–0xFF are read as Latin-1 by some
 * clients and UTF-8 by others. So every byte of the name's UTF-8 outside
 * visible ASCII is percent-encoded, as RFC 8187 does for non-ASCII values;
 * `%` is encoded so the form decodes unambiguously, `,` because the header
 * is a comma-separated list. TextEncoder writes a lone surrogate as U+FFFD,
 * so this never throws whatever string it is given.
 */
export function headerSafeName(name: string): string {
  let plain = true;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 0x21 || c > 0x7e || c === 0x25 || c === 0x2c) {
      plain = false;
      break;
    }
  }
  if (plain) return name;
  let out = "";
  for (const b of utf8.encode(name)) {
    out += b >= 0x21 && b <= 0x7e && b !== 0x25 && b !== 0x2c ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
