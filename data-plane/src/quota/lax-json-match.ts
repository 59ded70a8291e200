/**
 * How upstreams read the `stream` flag and its key more loosely than JSON.parse does, checked on
 * raw bytes without allocating (the top-level scan calls these once per top-level member, and a
 * client picks how many members it sends). Failing closed: a reading any upstream may make
 * counts, since adding stream_options to a request that does not stream costs nothing, while
 * missing one that does makes its tokens free.
 */

/** The decoded string does not match the target. */
export const NO_MATCH = 0;
/** It matches byte for byte (JSON.parse and Python see the same key). */
export const EXACT_MATCH = 1;
/** It matches only ignoring case (Go's encoding/json sees the key, pydantic does not). */
export const FOLDED_MATCH = 2;
export type Match = typeof NO_MATCH | typeof EXACT_MATCH | typeof FOLDED_MATCH;

const BACKSLASH = 0x5c;
const QUOTE = 0x22;
/**
 * The ASCII letter a non-ASCII character of at most two UTF-8 bytes folds onto when Go's
 * encoding/json compares keys (by simple folding, or by upper-casing the lower case): `ſ`
 * (U+017F) is `s`; `İ` (U+0130) and `ı` (U+0131) are `i`. Both readings count, failing closed.
 * (The Kelvin sign, `k`, takes three bytes and no watched key has a `k`.)
 */
function goFolded(code: number): number {
  if (code === 0x17f) return 0x73;
  if (code === 0x130 || code === 0x131) return 0x69;
  return -1;
}

/**
 * Whether the JSON string content `bytes[start, end)` (escapes not yet decoded, quotes left
 * out) is `target` (lowercase ASCII), ignoring ASCII case, and with `goFolding` also reading
 * the characters Go folds onto ASCII letters as those (goFolded), as its encoding/json matches
 * keys. Escapes are decoded here, by hand: `\u0073` is `s` to every parser.
 */
export function matchJsonString(
  bytes: Uint8Array,
  start: number,
  end: number,
  target: string,
  goFolding: boolean,
): Match {
  let exact = true;
  let j = 0;
  let i = start;
  while (i < end) {
    if (j >= target.length) return NO_MATCH;
    let code = bytes[i]!;
    if (code === BACKSLASH) {
      if (i + 1 >= end) return NO_MATCH;
      const escaped = bytes[i + 1]!;
      if (escaped === 0x75 /* u */) {
        if (i + 6 > end) return NO_MATCH;
        code = hex4(bytes, i + 2);
        if (code < 0) return NO_MATCH;
        i += 6;
      } else {
        // \" \\ \/ stand for themselves; \b \f \n \r \t for control bytes no target holds.
        code = escaped === 0x2f ? 0x2f : escaped === BACKSLASH || escaped === QUOTE ? escaped : -1;
        if (code < 0) return NO_MATCH;
        i += 2;
      }
    } else if (code >= 0x80) {
      // Two-byte UTF-8 may be a character Go folds onto a letter; any other matches no target.
      if (!goFolding || code < 0xc2 || code > 0xdf || i + 1 >= end) return NO_MATCH;
      code = ((code & 0x1f) << 6) | (bytes[i + 1]! & 0x3f);
      i += 2;
    } else {
      i++;
    }
    const want = target.charCodeAt(j++);
    if (code === want) continue;
    exact = false;
    if (code >= 0x41 && code <= 0x5a && (code | 0x20) === want) continue;
    if (goFolding && goFolded(code) === want) continue;
    return NO_MATCH;
  }
  if (j !== target.length) return NO_MATCH;
  return exact ? EXACT_MATCH : FOLDED_MATCH;
}

/** The value of four hex digits at `at`, or -1. */
function hex4(bytes: Uint8Array, at: number): number {
  let value = 0;
  for (let k = at; k < at + 4; k++) {
    const digit = hexDigit(bytes[k]!);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

function hexDigit(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  const lower = byte | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

/**
 * The strings pydantic's lax mode reads as `True` (vLLM's request models), compared ignoring
 * case.
 */
const TRUE_STRINGS = ["true", "1", "yes", "on", "t", "y"];
/** Longest raw string that can decode to one of them: `"yes"` with every letter `\uXXXX`. */
const TRUE_STRING_BYTES = 2 + 4 * 6;

/**
 * Whether a raw JSON value (`bytes[0, length)`, whitespace outside strings left out) is one an
 * upstream reads as true: `true`; a number equal to 1 (pydantic takes 1 and 1.0); one of
 * TRUE_STRINGS in any case.
 */
export function laxTrueBytes(bytes: Uint8Array, length: number): boolean {
  if (length === 0) return false;
  const first = bytes[0]!;
  if (first === 0x74 /* t */) return length === 4 && isLiteralTrue(bytes);
  if (first === QUOTE) {
    if (length < 3 || length > TRUE_STRING_BYTES || bytes[length - 1] !== QUOTE) return false;
    for (const target of TRUE_STRINGS) {
      if (matchJsonString(bytes, 1, length - 1, target, false) !== NO_MATCH) return true;
    }
    return false;
  }
  return (first >= 0x30 && first <= 0x39) || first === 0x2d ? numberIsOne(bytes, length) : false;
}

function isLiteralTrue(bytes: Uint8Array): boolean {
  return bytes[1] === 0x72 && bytes[2] === 0x75 && bytes[3] === 0x65;
}

/**
 * Whether a JSON number's text is 1 once read as a double (`1`, `1.0`, `10e-1`, `0.1E1`, or
 * `1.00000000000000001`, which Python's float rounds to 1.0). Approximate on purpose: a number a
 * hair from 1 read as 1 only adds stream_options to a request that did not stream.
 */
function numberIsOne(bytes: Uint8Array, length: number): boolean {
  let i = 0;
  if (bytes[0] === 0x2d) return false;
  let mantissa = 0;
  let scale = 0;
  let digits = 0;
  for (; i < length && isDigit(bytes[i]!); i++) {
    if (digits < 20) mantissa = mantissa * 10 + (bytes[i]! - 0x30);
    else scale++;
    if (mantissa > 0) digits++;
  }
  if (i < length && bytes[i] === 0x2e /* . */) {
    for (i++; i < length && isDigit(bytes[i]!); i++) {
      if (digits < 20) {
        mantissa = mantissa * 10 + (bytes[i]! - 0x30);
        scale--;
        if (mantissa > 0) digits++;
      }
    }
  }
  if (i < length && (bytes[i]! | 0x20) === 0x65 /* e */) {
    i++;
    let sign = 1;
    if (bytes[i] === 0x2b) i++;
    else if (bytes[i] === 0x2d) {
      sign = -1;
      i++;
    }
    let exponent = 0;
    for (; i < length && isDigit(bytes[i]!); i++) {
      if (exponent < 10_000) exponent = exponent * 10 + (bytes[i]! - 0x30);
    }
    scale += sign * exponent;
  }
  if (i !== length || mantissa === 0) return false;
  return Math.abs(mantissa * 10 ** scale - 1) < 1e-9;
}

function isDigit(byte: number): boolean {
  return byte >= 0x30 && byte <= 0x39;
}

/** laxTrueBytes for a value JSON.parse already read. */
export function laxTrue(value: unknown): boolean {
  if (value === true) return true;
  if (typeof value === "number") return Math.abs(value - 1) < 1e-9;
  return typeof value === "string" && TRUE_STRINGS.includes(asciiLower(value));
}

function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
}
