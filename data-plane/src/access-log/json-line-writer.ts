/**
 * Writes the pieces of a JSON line straight into a Buffer, byte by byte from JS: no string is
 * built for the line and no Buffer per line, so serializing a line allocates nothing on the
 * heap in the common case (ASCII that needs no escaping). The caller makes sure the buffer has
 * room (see `worstBytes`).
 */
export class JsonLineWriter {
  buffer: Buffer;
  /** Bytes written so far. */
  used = 0;

  constructor(buffer: Buffer) {
    this.buffer = buffer;
  }

  /** Starts again on `buffer`. */
  reset(buffer: Buffer): void {
    this.buffer = buffer;
    this.used = 0;
  }

  /** A constant the caller knows to be ASCII and valid JSON where it goes (keys, punctuation). */
  ascii(text: string): void {
    const buffer = this.buffer;
    let at = this.used;
    for (let i = 0; i < text.length; i++) buffer[at++] = text.charCodeAt(i);
    this.used = at;
  }

  /**
   * `value` as a JSON string. Request ids, methods, addresses, names and nearly every path are
   * printable ASCII without a quote or backslash: copied as they are. Anything else (a client
   * can put quotes, backslashes, control bytes or non-ASCII in a path or Host) is escaped by
   * JSON.stringify, which also writes a lone surrogate as a \u escape, so the line stays valid
   * UTF-8, and encoded as UTF-8.
   */
  string(value: string): void {
    const buffer = this.buffer;
    let at = this.used;
    buffer[at++] = QUOTE;
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if (c < 0x20 || c === QUOTE || c === BACKSLASH || c > 0x7e) {
        this.used += buffer.write(JSON.stringify(value), this.used);
        return;
      }
      buffer[at++] = c;
    }
    buffer[at++] = QUOTE;
    this.used = at;
  }

  /** A non-negative integer below 2^53 digit by digit; anything else as JSON.stringify writes it. */
  number(value: number): void {
    if (!(Number.isSafeInteger(value) && value >= 0)) {
      this.ascii(Number.isFinite(value) ? String(value) : "null");
      return;
    }
    this.#digits(value);
  }

  /**
   * `value` rounded to 0.01, written as JSON.stringify writes the rounded number (41.7, 0.05,
   * 12): finer is noise, and shorter lines cost less.
   */
  hundredths(value: number): void {
    const scaled = Math.round(value * 100);
    if (!(Number.isSafeInteger(scaled) && scaled >= 0)) {
      this.ascii(Number.isFinite(value) ? String(scaled / 100) : "null");
      return;
    }
    const whole = Math.floor(scaled / 100);
    const fraction = scaled - whole * 100;
    this.#digits(whole);
    if (fraction === 0) return;
    const buffer = this.buffer;
    buffer[this.used++] = DOT;
    buffer[this.used++] = ZERO + Math.floor(fraction / 10);
    // 41.70 is written 41.7, as the number would be.
    if (fraction % 10 !== 0) buffer[this.used++] = ZERO + (fraction % 10);
  }

  /** Exactly `width` digits of `value`, zeros in front (the milliseconds of a time). */
  padded(value: number, width: number): void {
    const buffer = this.buffer;
    let rest = value;
    for (let i = this.used + width - 1; i >= this.used; i--) {
      buffer[i] = ZERO + (rest % 10);
      rest = Math.floor(rest / 10);
    }
    this.used += width;
  }

  #digits(value: number): void {
    const buffer = this.buffer;
    let width = 1;
    for (let power = 10; power <= value; power *= 10) width++;
    let rest = value;
    for (let i = this.used + width - 1; i >= this.used; i--) {
      buffer[i] = ZERO + (rest % 10);
      rest = Math.floor(rest / 10);
    }
    this.used += width;
  }
}

/**
 * The most bytes `string` writes for a value of `length` UTF-16 units: an escape (\u0001, or a
 * lone surrogate's \ud800) takes 6 bytes for one unit, more than UTF-8 needs for any unit (3).
 */
export function worstStringBytes(length: number): number {
  return 2 + 6 * length;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const DOT = 0x2e;
const ZERO = 0x30;
