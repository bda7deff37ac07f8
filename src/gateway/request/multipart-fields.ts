/** A transcription's multipart form read for its `model` and `stream` fields as the body arrives (busboy, chunk by chunk): the audio itself is skipped, never copied nor parsed in one piece on the loop. */
import busboy from "busboy";
import { LlmgwError } from "../../shared/errors.ts";
import type { InferenceBody } from "./parse.ts";

/** Bounds on the form's small fields (a model name, "true"), so a form of many or large fields is refused, not held twice. */
const LIMITS = { fieldSize: 64 * 1024, fields: 64, parts: 128 } as const;

function unreadable(detail: string): LlmgwError {
  return new LlmgwError("INVALID_REQUEST", `the multipart form could not be read (${detail})`, { param: "file" });
}

export class MultipartFields {
  readonly #bb: busboy.Busboy;
  readonly #fields = new Map<string, string>();
  #file = false;
  #failure: LlmgwError | undefined;
  readonly #closed: Promise<void>;

  /** A body that is not a multipart form (or has no boundary) is a 400 here, before a byte is read. */
  constructor(contentType: string | null) {
    if (contentType === null || !/^multipart\/form-data\s*;.*boundary=/i.test(contentType)) {
      throw new LlmgwError("INVALID_REQUEST", "a transcription must be sent as multipart/form-data (a boundary included)", { param: "file" });
    }
    try {
      this.#bb = busboy({ headers: { "content-type": contentType }, limits: LIMITS });
    } catch (err) {
      throw unreadable(err instanceof Error ? err.message : String(err));
    }
    this.#bb.on("field", (name, value) => {
      // The first of a repeated field counts, as FormData.get() reads it.
      if (!this.#fields.has(name)) this.#fields.set(name, value);
    });
    this.#bb.on("file", (name, stream) => {
      if (name === "file") this.#file = true;
      stream.resume();
    });
    this.#closed = new Promise<void>((resolve) => {
      this.#bb.on("close", resolve);
      this.#bb.on("error", (err: unknown) => {
        this.#failure ??= unreadable(err instanceof Error ? err.message : String(err));
        resolve();
      });
    });
  }

  /** One chunk of the body, in order. */
  push(chunk: Uint8Array): void {
    if (this.#failure === undefined) this.#bb.write(chunk);
  }

  /** The body has ended: the fields the gateway relies on, or a 400 naming what is missing or malformed. */
  async end(): Promise<InferenceBody> {
    if (this.#failure === undefined) this.#bb.end();
    await this.#closed;
    if (this.#failure !== undefined) throw this.#failure;
    const model = this.#fields.get("model");
    if (model === undefined || model.length === 0) throw new LlmgwError("INVALID_REQUEST", "you must provide a model parameter", { param: "model" });
    if (!this.#file) throw new LlmgwError("INVALID_REQUEST", "'file' (an audio file) is required", { param: "file" });
    return { model, stream: this.#fields.get("stream") === "true" };
  }

  /** The read was abandoned (a refusal, a deadline): stop parsing. */
  destroy(): void {
    this.#failure ??= unreadable("the body was not read to its end");
    this.#bb.destroy();
  }
}
