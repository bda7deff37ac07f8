import { expect, test } from "bun:test";
import { MultipartFields } from "../../src/gateway/request/multipart-fields.ts";
import { LlmgwError } from "../../src/shared/errors.ts";

const TYPE = "multipart/form-data; boundary=XX";
const part = (name: string, value: string, filename?: string) =>
  `--XX\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"\r\nContent-Type: audio/wav` : ""}\r\n\r\n${value}\r\n`;
const END = "--XX--\r\n";

/** Feed `body` in chunks of `size` bytes, as a request body arrives. */
async function fieldsOf(body: string, size: number, type: string | null = TYPE) {
  const form = new MultipartFields(type);
  const bytes = new TextEncoder().encode(body);
  for (let i = 0; i < bytes.length; i += size) form.push(bytes.subarray(i, i + size));
  return form.end();
}

async function codeAndParam(p: Promise<unknown>): Promise<[string, string | null]> {
  try {
    await p;
  } catch (err) {
    if (err instanceof LlmgwError) return [err.code, err.param ?? null];
    throw err;
  }
  throw new Error("expected a refusal");
}

test("model and stream are read whatever the chunking, before or after the file; the first of a repeated field counts", async () => {
  const audio = "\u0007".repeat(5000);
  for (const size of [1, 7, 64, 100_000]) {
    expect(await fieldsOf(part("model", "whisper") + part("file", audio, "a.wav") + part("stream", "true") + END, size)).toEqual({
      model: "whisper",
      stream: true,
    });
    expect(await fieldsOf(part("file", audio, "a.wav") + part("model", "m") + part("model", "other") + END, size)).toEqual({ model: "m", stream: false });
  }
});

test("a missing model or file, a truncated form and a body that is not a multipart form are 400s naming the field", async () => {
  expect(await codeAndParam(fieldsOf(part("file", "abc", "a.wav") + END, 16))).toEqual(["INVALID_REQUEST", "model"]);
  expect(await codeAndParam(fieldsOf(part("model", "m") + END, 16))).toEqual(["INVALID_REQUEST", "file"]);
  expect(await codeAndParam(fieldsOf(part("model", "m") + part("file", "abc", "a.wav").slice(0, 40), 16))).toEqual(["INVALID_REQUEST", "file"]);
  expect(await codeAndParam(fieldsOf("{}", 16, "application/json"))).toEqual(["INVALID_REQUEST", "file"]);
  expect(await codeAndParam(fieldsOf("{}", 16, null))).toEqual(["INVALID_REQUEST", "file"]);
});

test("a read abandoned midway ends as a 400, not a hang", async () => {
  const form = new MultipartFields(TYPE);
  form.push(new TextEncoder().encode(part("model", "m").slice(0, 20)));
  form.destroy();
  expect((await codeAndParam(form.end()))[0]).toBe("INVALID_REQUEST");
});
