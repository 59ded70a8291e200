/**
 * Longest top-level value kept (a `stream_options` object; real ones are a few dozen bytes).
 * Whitespace between tokens is not kept, so padding cannot push a value past it.
 */
export const TOP_LEVEL_VALUE_BYTES = 4096;

/**
 * Longest raw top-level key kept: "stream_options" written with every character escaped
 * (`\u0073...`) is 84 bytes, and a parser upstream reads that as the key all the same.
 */
const KEY_BYTES = 128;

/** A `stream_options` value longer than TOP_LEVEL_VALUE_BYTES: seen, but not kept. */
export const VALUE_TOO_LARGE = Symbol("value too large");

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** Where the scan is in the body as a whole. */
type Phase = "before" | "object" | "closed" | "not_object";
/** What a byte at depth 1, outside a string, may be. */
type Expect = "key" | "colon" | "value";
/** The top-level keys whose values are kept. */
type Watched = "stream" | "stream_options" | undefined;

/**
 * Follows the top level of a JSON object as its bytes arrive, in chunks split anywhere, without
 * holding the body: strings (escapes included), nesting depth, and which top-level key each
 * value belongs to. It keeps the values of the top-level `stream` and `stream_options` keys (the
 * last of each, as a JSON parser upstream keeps the last of two equal keys), so a request body
 * too large to read whole can still be asked to report its token usage (include-usage-at-end.ts).
 * A `"stream"` inside a nested object or a string never counts. Bytes are scanned, not decoded:
 * the bytes of a multi-byte UTF-8 character are all >= 0x80 and never read as structure, and a
 * key with escapes is decoded whole once it ends.
 *
 * It does not validate: a body that is not valid JSON is refused upstream however it is read.
 */
export class JsonTopLevelScan {
  #phase: Phase = "before";
  #depth = 0;
  #inString = false;
  #escaped = false;
  #expect: Expect = "key";
  #readingKey = false;
  readonly #key = new ByteCapture(KEY_BYTES);
  /** The key of the top-level value being read, when it is one of those kept. */
  #watched: Watched;
  /**
   * The bytes of that value, from the colon on, whitespace outside strings left out. One buffer
   * for the whole scan: a body repeating `"stream":1,` must not cost an allocation each time.
   */
  #value: ByteCapture | undefined;
  #capturing = false;
  /** Bytes before the opening `{`, and how many of them were a byte order mark's. */
  #leadingBytes = 0;
  #bomBytes = 0;
  /** Top-level members seen (keys started). */
  #members = 0;
  #streams = false;
  #streamOptions: Buffer | typeof VALUE_TOO_LARGE | undefined;

  /**
   * Scans the next chunk. Returns the index in it of the `}` that closes the top-level object,
   * or -1: not closed yet, or already closed in an earlier chunk, or not an object at all.
   * Nothing is scanned once the object closed or the body turned out not to be one.
   */
  push(chunk: Uint8Array): number {
    let i = 0;
    if (this.#phase === "before") i = this.#open(chunk);
    if (this.#phase !== "object") return -1;
    const length = chunk.length;
    // Where the next quote and backslash are, searched natively and only once passed: a string
    // nobody keeps (a message's content, most of a large body) is crossed in jumps, not byte by
    // byte, at no more than one pass over the chunk per character searched for.
    let nextQuote = -1;
    let nextBackslash = -1;
    for (; i < length; i++) {
      const byte = chunk[i]!;
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (byte === BACKSLASH) this.#escaped = true;
        else if (byte === QUOTE) {
          this.#inString = false;
          if (this.#readingKey) {
            this.#endKey();
            continue;
          }
        }
        if (this.#readingKey) this.#key.push(byte);
        else if (this.#capturing) this.#value!.push(byte);
        else if (this.#inString && !this.#escaped) {
          // On to the byte before the next one that matters (the loop steps onto it).
          if (nextQuote <= i) nextQuote = indexOrEnd(chunk, QUOTE, i + 1);
          if (nextBackslash <= i) nextBackslash = indexOrEnd(chunk, BACKSLASH, i + 1);
          i = Math.min(nextQuote, nextBackslash) - 1;
        }
        continue;
      }
      switch (byte) {
        case SPACE:
        case TAB:
        case LF:
        case CR:
          continue;
        case QUOTE:
          this.#inString = true;
          if (this.#depth === 1 && this.#expect === "key") {
            this.#readingKey = true;
            this.#key.clear();
            this.#members++;
            continue;
          }
          break;
        case OPEN_BRACE:
        case OPEN_BRACKET:
          this.#depth++;
          break;
        case CLOSE_BRACKET:
          if (--this.#depth < 1) {
            this.#phase = "not_object";
            return -1;
          }
          break;
        case CLOSE_BRACE:
          if (--this.#depth === 0) {
            this.#endValue();
            this.#phase = "closed";
            return i;
          }
          break;
        case COMMA:
          if (this.#depth === 1) {
            this.#endValue();
            this.#expect = "key";
            continue;
          }
          break;
        case COLON:
          if (this.#depth === 1 && this.#expect === "colon") {
            this.#expect = "value";
            if (this.#watched !== undefined) this.#startValue();
            continue;
          }
          break;
      }
      if (this.#capturing) this.#value!.push(byte);
    }
    return -1;
  }

  /** The top-level object has closed: every top-level key has been seen. */
  get closed(): boolean {
    return this.#phase === "closed";
  }

  /** The body does not start with `{` (after whitespace), or its nesting broke. */
  get notObject(): boolean {
    return this.#phase === "not_object";
  }

  /** The object has at least one member: a field added after them needs a comma. */
  get hasMembers(): boolean {
    return this.#members > 0;
  }

  /** The last top-level `stream` is the literal `true`. */
  get streams(): boolean {
    return this.#streams;
  }

  /**
   * The last top-level `stream_options` value's bytes (whitespace between tokens left out);
   * VALUE_TOO_LARGE when longer than TOP_LEVEL_VALUE_BYTES; undefined when there is none.
   */
  get streamOptions(): Buffer | typeof VALUE_TOO_LARGE | undefined {
    return this.#streamOptions;
  }

  /**
   * Skips a UTF-8 byte order mark, then whitespace; the index after the opening `{`, once it
   * came. A parser upstream may take the mark (Python's json.loads on bytes does), so a body that
   * starts with one is an object all the same: left unscanned, it would escape the budget.
   */
  #open(chunk: Uint8Array): number {
    for (let i = 0; i < chunk.length; i++, this.#leadingBytes++) {
      const byte = chunk[i]!;
      if (this.#leadingBytes < BOM.length && this.#leadingBytes === this.#bomBytes) {
        if (byte === BOM[this.#bomBytes]) {
          this.#bomBytes++;
          continue;
        }
        if (this.#bomBytes > 0) return this.#notAnObject(i);
      }
      if (isWhitespace(byte)) continue;
      if (byte !== OPEN_BRACE) return this.#notAnObject(i);
      this.#phase = "object";
      this.#depth = 1;
      return i + 1;
    }
    return chunk.length;
  }

  #notAnObject(at: number): number {
    this.#phase = "not_object";
    return at;
  }

  #endKey(): void {
    this.#readingKey = false;
    this.#expect = "colon";
    this.#watched = watchedKey(this.#key);
  }

  #startValue(): void {
    this.#value ??= new ByteCapture(TOP_LEVEL_VALUE_BYTES);
    this.#value.clear();
    this.#capturing = true;
  }

  /** A top-level value ended (at the `,` or `}` after it): keeps it if it is watched. */
  #endValue(): void {
    const watched = this.#watched;
    this.#watched = undefined;
    if (!this.#capturing) return;
    this.#capturing = false;
    const value = this.#value!;
    if (watched === "stream") this.#streams = value.equals(TRUE);
    else if (watched === "stream_options")
      this.#streamOptions = value.overflowed ? VALUE_TOO_LARGE : value.copy();
  }
}

const TRUE = Buffer.from("true");
/** UTF-8's byte order mark, U+FEFF. */
const BOM = [0xef, 0xbb, 0xbf];
const STREAM = Buffer.from("stream");
const STREAM_OPTIONS = Buffer.from("stream_options");

function watchedKey(key: ByteCapture): Watched {
  if (key.overflowed) return undefined;
  if (key.equals(STREAM)) return "stream";
  if (key.equals(STREAM_OPTIONS)) return "stream_options";
  if (!key.includes(BACKSLASH)) return undefined;
  // An escaped key ("str\u0065am") is the same key to the parser upstream.
  let decoded: unknown;
  try {
    decoded = JSON.parse(`"${key.copy().toString("utf8")}"`);
  } catch {
    return undefined;
  }
  return decoded === "stream" || decoded === "stream_options" ? decoded : undefined;
}

/** The index of `byte` in `chunk` from `from` on, or the chunk's length when there is none. */
function indexOrEnd(chunk: Uint8Array, byte: number, from: number): number {
  const at = chunk.indexOf(byte, from);
  return at < 0 ? chunk.length : at;
}

function isWhitespace(byte: number): boolean {
  return byte === SPACE || byte === TAB || byte === LF || byte === CR;
}

/** Up to `limit` bytes, kept across chunks; past it only the fact that it overflowed. */
class ByteCapture {
  readonly #bytes: Buffer;
  #length = 0;
  #overflowed = false;

  constructor(limit: number) {
    this.#bytes = Buffer.allocUnsafe(limit);
  }

  push(byte: number): void {
    if (this.#length < this.#bytes.length) this.#bytes[this.#length++] = byte;
    else this.#overflowed = true;
  }

  clear(): void {
    this.#length = 0;
    this.#overflowed = false;
  }

  get overflowed(): boolean {
    return this.#overflowed;
  }

  equals(other: Buffer): boolean {
    return !this.#overflowed && this.#bytes.subarray(0, this.#length).equals(other);
  }

  includes(byte: number): boolean {
    return this.#bytes.subarray(0, this.#length).includes(byte);
  }

  copy(): Buffer {
    return Buffer.from(this.#bytes.subarray(0, this.#length));
  }
}
