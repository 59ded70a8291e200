import { JsonLineWriter } from "./json-line-writer.js";

/**
 * Access-log lines gathered into one buffer and handed on whole once the next line would not
 * fit (nginx's `access_log ... buffer=64k`). Each line is written straight into the batch: no
 * Buffer per line, and the stream below (sonic-boom) sees one write per batch instead of one
 * per line. A batch only ever holds whole lines, so on stdout the operational log can land
 * between two lines but never inside one.
 */
export class LineBatch {
  readonly #writer: JsonLineWriter;

  constructor(
    private readonly bytes: number,
    /** Takes a full batch and keeps it: the next batch gets a new buffer. */
    private readonly out: (chunk: Buffer) => void,
  ) {
    this.#writer = new JsonLineWriter(Buffer.allocUnsafeSlow(bytes));
  }

  /** Nothing waits to be handed on. */
  get empty(): boolean {
    return this.#writer.used === 0;
  }

  /**
   * The writer for the next line, with room for `worstBytes` more: when the batch has not that
   * much left, it is handed on first. A line longer than a batch (a path of many KiB) gets a
   * batch of its own size.
   */
  reserve(worstBytes: number): JsonLineWriter {
    const writer = this.#writer;
    if (worstBytes > writer.buffer.length - writer.used) {
      this.flush();
      if (worstBytes > writer.buffer.length) writer.reset(Buffer.allocUnsafeSlow(worstBytes));
    }
    return writer;
  }

  /**
   * Hands on what was gathered, if anything, and starts a new batch: to the batch's `out`, or to
   * `to` (the process's exit writes it synchronously instead).
   */
  flush(to: (chunk: Buffer) => void = this.out): void {
    const writer = this.#writer;
    if (writer.used === 0) return;
    const chunk = writer.buffer.subarray(0, writer.used);
    // A new buffer rather than reusing this one: the stream holds the chunk until its write
    // completes on libuv's thread pool. One allocation per ~200 lines.
    writer.reset(Buffer.allocUnsafeSlow(this.bytes));
    to(chunk);
  }
}
