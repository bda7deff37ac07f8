/**
 * File bytes of the embedded store on disk (data_dir/files/<id>), never in
 * memory or in the database: written chunk by chunk (each write awaited,
 * which is the backpressure), fsynced and renamed into place when the file
 * is stored, sent to a client as a Bun file (sendfile, no copy through the
 * event loop), and unlinked first when a file is deleted, which frees room
 * on a full disk before the database is touched.
 */
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { type FileHandle, open, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { ContentWriter } from "./jobs-store.ts";
import { isStorageFull, storageFull } from "./storage-errors.ts";

const PARTIAL_PREFIX = ".partial-";

export class DiskFileWriter implements ContentWriter {
  #bytes = 0;
  #done = false;

  constructor(
    readonly id: string,
    readonly path: string,
    private readonly handle: FileHandle,
  ) {}

  get bytes(): number {
    return this.#bytes;
  }

  async write(chunk: Uint8Array): Promise<void> {
    let off = 0;
    try {
      while (off < chunk.byteLength) off += (await this.handle.write(chunk, off, chunk.byteLength - off)).bytesWritten;
    } catch (err) {
      throw isStorageFull(err) ? storageFull("writing the file") : err;
    }
    this.#bytes += chunk.byteLength;
  }

  /** Flushed to disk and closed; the caller renames it into place. */
  async finish(): Promise<void> {
    this.#done = true;
    try {
      await this.handle.sync();
    } catch (err) {
      await this.abort();
      throw isStorageFull(err) ? storageFull("writing the file") : err;
    } finally {
      await this.handle.close().catch(() => {});
    }
  }

  async abort(): Promise<void> {
    if (!this.#done) await this.handle.close().catch(() => {});
    this.#done = true;
    await unlink(this.path).catch(() => {});
  }
}

export class DiskContent {
  readonly #dir: string;

  constructor(dir: string) {
    this.#dir = dir;
    mkdirSync(dir, { recursive: true });
    // Bytes of uploads a previous run did not finish: never named by a row.
    for (const f of readdirSync(dir)) if (f.startsWith(PARTIAL_PREFIX)) rmSync(join(dir, f), { force: true });
  }

  pathOf(id: string): string {
    return join(this.#dir, encodeURIComponent(id));
  }

  async open(id: string): Promise<DiskFileWriter> {
    const path = join(this.#dir, `${PARTIAL_PREFIX}${encodeURIComponent(id)}-${crypto.randomUUID()}`);
    try {
      return new DiskFileWriter(id, path, await open(path, "wx"));
    } catch (err) {
      throw isStorageFull(err) ? storageFull("writing the file") : err;
    }
  }

  /** Make the writer's bytes file `id`'s (replacing what was there). */
  async commit(w: DiskFileWriter): Promise<void> {
    await w.finish();
    await rename(w.path, this.pathOf(w.id));
  }

  async remove(id: string): Promise<void> {
    await unlink(this.pathOf(id)).catch((err: unknown) => {
      if ((err as { code?: unknown }).code !== "ENOENT") throw err;
    });
  }

  file(id: string): Blob {
    return Bun.file(this.pathOf(id));
  }
}
