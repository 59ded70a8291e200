/**
 * Whether a request body is a JSON object in UTF-16 or UTF-32, as Python's `json.loads` reads
 * bytes: FastAPI/Starlette upstreams (vLLM, SGLang, LiteLLM) call it on the raw body, and it
 * picks the encoding from the first bytes (`json.detect_encoding`). The gateway reads UTF-8
 * only, so such a body would stream without include_usage, free of its token budget: on an
 * injectStreamUsage route it is refused instead.
 *
 * "refuse": the encoding is UTF-16/32 and the first code unit after any byte order mark and
 * JSON whitespace is `{`, or there is still only whitespace at the decision point (the end of
 * the body, or WIDE_WHITESPACE_LIMIT bytes into it: nobody legitimately sends kilobytes of
 * UTF-16 whitespace, so that fails closed). "pass": UTF-8 (with or without its mark), or a wide
 * encoding whose first unit is something else (an MP4 starts `00 00 00 20 66 74 79 70`, UTF-32-BE
 * to Python: a space, then not `{`). The verdict depends on the bytes alone, not on how they
 * were split into chunks: the encoding waits for 4 bytes (or the whole shorter body).
 */
export type WideJsonVerdict = "undecided" | "refuse" | "pass";

/** Bytes into a wide body past which whitespace alone is refused. */
export const WIDE_WHITESPACE_LIMIT = 1024;

export class WideJsonSniff {
  /** The body's first bytes, until the encoding is known. */
  readonly #head = new Uint8Array(4);
  #seen = 0;
  #verdict: WideJsonVerdict = "undecided";
  /** 2 or 4 once the encoding is wide; 0 before. */
  #unitBytes = 0;
  #bigEndian = false;
  /** The code unit being read, and how many of its bytes were. */
  #unit = 0;
  #unitRead = 0;

  /** The next chunk of the body; once decided, the verdict stays and chunks are not read. */
  push(chunk: Uint8Array): WideJsonVerdict {
    let at = 0;
    while (this.#verdict === "undecided" && at < chunk.length) {
      if (this.#unitBytes === 0) {
        this.#head[this.#seen++] = chunk[at++]!;
        if (this.#seen === 4) this.#choose(4);
      } else {
        this.#read(chunk[at++]!);
        this.#seen++;
        if (this.#verdict === "undecided" && this.#seen >= WIDE_WHITESPACE_LIMIT)
          this.#verdict = "refuse";
      }
    }
    return this.#verdict;
  }

  /** The body ended: decides one shorter than 4 bytes, or one still only whitespace. */
  end(): "refuse" | "pass" {
    if (this.#verdict === "undecided" && this.#unitBytes === 0) this.#choose(this.#seen);
    // Only whitespace (or nothing) after the mark: fail closed.
    if (this.#verdict === "undecided") this.#verdict = "refuse";
    return this.#verdict;
  }

  /** json.detect_encoding on the first `length` bytes (4, or a whole shorter body). */
  #choose(length: number): void {
    const b = this.#head;
    let mark = 0;
    if (length >= 4 && b[0] === 0 && b[1] === 0 && b[2] === 0xfe && b[3] === 0xff) {
      this.#wide(4, true);
      mark = 4;
    } else if (length >= 4 && b[0] === 0xff && b[1] === 0xfe && b[2] === 0 && b[3] === 0) {
      this.#wide(4, false);
      mark = 4;
    } else if (length >= 2 && b[0] === 0xfe && b[1] === 0xff) {
      this.#wide(2, true);
      mark = 2;
    } else if (length >= 2 && b[0] === 0xff && b[1] === 0xfe) {
      this.#wide(2, false);
      mark = 2;
    } else if (length === 4 && b[0] === 0) {
      this.#wide(b[1] !== 0 ? 2 : 4, true);
    } else if (length === 4 && b[1] === 0) {
      this.#wide(b[2] !== 0 || b[3] !== 0 ? 2 : 4, false);
    } else if (length === 2 && b[0] === 0) {
      this.#wide(2, true);
    } else if (length === 2 && b[1] === 0) {
      this.#wide(2, false);
    }
    // UTF-8, its mark included: the gateway reads it.
    if (this.#unitBytes === 0) {
      this.#verdict = "pass";
      return;
    }
    for (let i = mark; i < length && this.#verdict === "undecided"; i++) this.#read(b[i]!);
  }

  #wide(unitBytes: number, bigEndian: boolean): void {
    this.#unitBytes = unitBytes;
    this.#bigEndian = bigEndian;
  }

  /** One byte of a code unit; a whole unit decides unless it is JSON whitespace. */
  #read(byte: number): void {
    const read = this.#unitRead;
    // Multiplication, not shifts: a UTF-32 unit may not fit a signed 32-bit int.
    this.#unit = this.#bigEndian ? this.#unit * 256 + byte : this.#unit + byte * 256 ** read;
    this.#unitRead = read + 1;
    if (this.#unitRead < this.#unitBytes) return;
    const unit = this.#unit;
    this.#unit = 0;
    this.#unitRead = 0;
    if (unit === 0x20 || unit === 0x09 || unit === 0x0a || unit === 0x0d) return;
    this.#verdict = unit === 0x7b ? "refuse" : "pass";
  }
}

/** The verdict on a body read whole. */
export function wideJsonBody(body: Uint8Array): "refuse" | "pass" {
  const sniff = new WideJsonSniff();
  sniff.push(body);
  return sniff.end();
}
