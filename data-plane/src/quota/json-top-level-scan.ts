import { EXACT_MATCH, laxTrueBytes, matchJsonString, NO_MATCH } from "./lax-json-match.js";

/**
 * Longest top-level value kept (a `stream_options` object; real ones are a few dozen bytes).
 * Whitespace between tokens is not kept, so padding cannot push a value past it.
 */
export const TOP_LEVEL_VALUE_BYTES = 4096;

/**
 * Longest raw top-level key kept: "stream_options" written with every character escaped
 * (`\u0073...`) is 84 bytes, and a parser upstream reads that as the key all the same. A longer
 * key is not kept past this, nor compared.
 */
const KEY_BYTES = 84;

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
 * value belongs to. It reads the values of the top-level `stream` and `stream_options` keys (the
 * last of each, as a JSON parser upstream keeps the last of two equal keys), so a request body
 * too large to read whole can still be asked to report its token usage (include-usage-at-end.ts).
 * A `"stream"` inside a nested object or a string never counts. Bytes are scanned, not decoded:
 * the bytes of a multi-byte UTF-8 character are all >= 0x80 and never read as structure, and a
 * key is decoded by hand, compared as it is decoded (lax-json-match.ts).
 *
 * It reads as loosely as any upstream may (failing closed): a key equal to `stream` ignoring case
 * (Go's encoding/json), a value pydantic's lax mode takes as true (`1`, `"yes"`).
 *
 * The client picks how many top-level members it sends, so nothing here allocates per member: a
 * key that cannot be a watched one is known at its first byte and crossed like any string, and
 * the last `stream_options` is kept in one of two buffers that swap, copied once when asked for.
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
  /** The key being read may still be a watched one (its bytes are kept). */
  #keyLive = false;
  readonly #key = new ByteCapture(KEY_BYTES);
  /** The key of the top-level value being read, when it is one of those kept. */
  #watched: Watched;
  /** That key is written exactly so, not only equal ignoring case. */
  #watchedExact = false;
  /**
   * The bytes of that value, from the colon on, whitespace outside strings left out. One buffer
   * for the whole scan: a body repeating `"stream":1,` must not cost an allocation each time.
   */
  #value: ByteCapture | undefined;
  /** The last `stream_options` value: swapped with #value when one ends, never copied then. */
  #options: ByteCapture | undefined;
  #capturing = false;
  /** Bytes before the opening `{`, and how many of them were a byte order mark's. */
  #leadingBytes = 0;
  #bomBytes = 0;
  /** Top-level members seen (keys started). */
  #members = 0;
  /** The last `stream` key in any case, and the last exactly so, read as true. */
  #streamsFolded = false;
  #streamsExact = false;
  #hasOptions = false;
  #optionsExact = false;
  #optionsCopy: Buffer | undefined;

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
        // A value past its limit is only seen to end: its bytes are crossed like any string's.
        if (this.#readingKey ? this.#keyLive : this.#capturing && !this.#value!.overflowed) {
          if (this.#readingKey) this.#pushKeyByte(byte);
          else this.#value!.push(byte);
        } else if (this.#inString && !this.#escaped) {
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
            this.#keyLive = true;
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

  /**
   * An upstream may read the request as streaming: the last top-level `stream` key in any case
   * (Go), or the last one written exactly so (Python), has a value read as true (laxTrueBytes).
   */
  get streams(): boolean {
    return this.#streamsFolded || this.#streamsExact;
  }

  /**
   * The last top-level `stream_options` value's bytes, its key in any case (whitespace between
   * tokens left out); VALUE_TOO_LARGE when longer than TOP_LEVEL_VALUE_BYTES; undefined when
   * there is none. Copied on the first call, once the scan is over.
   */
  get streamOptions(): Buffer | typeof VALUE_TOO_LARGE | undefined {
    if (!this.#hasOptions) return undefined;
    const options = this.#options!;
    if (options.overflowed) return VALUE_TOO_LARGE;
    this.#optionsCopy ??= options.copy();
    return this.#optionsCopy;
  }

  /**
   * The key of that last stream_options is written exactly so: then every parser upstream reads
   * that value. When it is not, an exact-case parser may read another one (or none).
   */
  get streamOptionsExact(): boolean {
    return this.#optionsExact;
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

  /**
   * A watched key starts with `s`, `S`, `ſ` (Go folds it to `s`) or an escape; any other is
   * dropped at its first byte, and one past KEY_BYTES as soon as it is.
   */
  #pushKeyByte(byte: number): void {
    const key = this.#key;
    if (key.length === 0 && byte !== 0x73 && byte !== 0x53 && byte !== BACKSLASH && byte !== 0xc5)
      this.#keyLive = false;
    else if (!key.push(byte)) this.#keyLive = false;
  }

  #endKey(): void {
    this.#readingKey = false;
    this.#expect = "colon";
    this.#watched = undefined;
    const key = this.#key;
    // 6 bytes is "stream" unescaped; 84 is "stream_options" with every character escaped.
    if (!this.#keyLive || key.length < 6) return;
    const raw = key.raw;
    let match = matchJsonString(raw, 0, key.length, "stream", true);
    if (match !== NO_MATCH) this.#watched = "stream";
    else {
      match = matchJsonString(raw, 0, key.length, "stream_options", true);
      if (match !== NO_MATCH) this.#watched = "stream_options";
    }
    this.#watchedExact = match === EXACT_MATCH;
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
    if (watched === "stream") {
      // A value too long to keep may still be one an upstream reads as true (`1.000...0`,
      // `1e000...0`): failing closed, it streams.
      const streams = value.overflowed || laxTrueBytes(value.raw, value.length);
      this.#streamsFolded = streams;
      if (this.#watchedExact) this.#streamsExact = streams;
    } else if (watched === "stream_options") {
      // Kept by swapping buffers: the next value is read into the one this replaces.
      this.#options ??= new ByteCapture(TOP_LEVEL_VALUE_BYTES);
      this.#value = this.#options;
      this.#options = value;
      this.#hasOptions = true;
      this.#optionsExact = this.#watchedExact;
      this.#optionsCopy = undefined;
    }
  }
}

/** UTF-8's byte order mark, U+FEFF. */
const BOM = [0xef, 0xbb, 0xbf];

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

  /** False once it overflowed. */
  push(byte: number): boolean {
    if (this.#length < this.#bytes.length) {
      this.#bytes[this.#length++] = byte;
      return true;
    }
    this.#overflowed = true;
    return false;
  }

  clear(): void {
    this.#length = 0;
    this.#overflowed = false;
  }

  get overflowed(): boolean {
    return this.#overflowed;
  }

  get length(): number {
    return this.#length;
  }

  /** The backing bytes; only the first `length` are this capture's. */
  get raw(): Buffer {
    return this.#bytes;
  }

  copy(): Buffer {
    return Buffer.from(this.#bytes.subarray(0, this.#length));
  }
}
