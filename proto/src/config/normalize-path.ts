import { isUtf8 } from "node:buffer";

/**
 * Why a request path was refused. Each one is something a backend may read differently from
 * the gateway, so that a path the route table saw as harmless becomes another one upstream.
 */
export type PathRefusal =
  /** Not origin-form: the path does not start with "/". */
  | "not_absolute"
  /** %2F: some backends decode it into a separator after routing. */
  | "encoded_slash"
  /** "\" or %5C: some servers (IIS, Windows file systems) treat it as "/". */
  | "backslash"
  /** NUL or another control character, raw or percent-encoded. */
  | "control_character"
  /** "%" without two hex digits, or encoded bytes that are not UTF-8 (overlong "%C0%AE"). */
  | "bad_percent_encoding"
  /**
   * A raw ";" (a path parameter, "/admin;x=1/secret"): Tomcat, Jetty and Spring strip ";..." from
   * a segment, so "admin;x=1" would be "admin" upstream but not in the route table.
   */
  | "path_parameter"
  /** A raw "#": a fragment never belongs in a request target (RFC 9112 section 3.2.1). */
  | "fragment"
  /** ".%3Bx" or "..%3Bx": a backend that decodes it first then strips ";x" sees a dot-segment. */
  | "dot_segment_parameter";

export interface PathRefused {
  readonly ok: false;
  readonly reason: PathRefusal;
}

const REFUSED: Readonly<Record<PathRefusal, PathRefused>> = Object.freeze({
  not_absolute: refusal("not_absolute"),
  encoded_slash: refusal("encoded_slash"),
  backslash: refusal("backslash"),
  control_character: refusal("control_character"),
  bad_percent_encoding: refusal("bad_percent_encoding"),
  path_parameter: refusal("path_parameter"),
  fragment: refusal("fragment"),
  dot_segment_parameter: refusal("dot_segment_parameter"),
});

const SLASH = 47;
const DOT = 46;
const PERCENT = 37;
const BACKSLASH = 92;
const SEMICOLON = 59;
const HASH = 35;
const DEL = 127;

/**
 * The path the gateway matches routes on and forwards, so the route table and the backend read
 * the same path (what Envoy's normalize_path plus merge_slashes and nginx do):
 * - percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are decoded, the hex of every
 *   other percent-encoding is upper-cased (RFC 3986 sections 6.2.2.1 and 6.2.2.2);
 * - consecutive slashes are merged into one;
 * - "." and ".." segments are removed (RFC 3986 section 5.2.4), a ".." above the root is
 *   dropped, as the RFC says, not refused.
 * What cannot be normalized without guessing how the backend reads it is refused instead (see
 * PathRefusal). `path` excludes the query string, which is never touched.
 *
 * Runs on every request: one scan refuses the raw characters, and a path without "%", "//" or
 * a segment that starts with "." followed by ".", "/" or the end is returned as it came,
 * without allocating.
 */
export function normalizePath(path: string): string | PathRefused {
  if (path.charCodeAt(0) !== SLASH) return REFUSED.not_absolute;
  const length = path.length;
  let previous = SLASH;
  let normalize = false;
  for (let i = 1; i < length; i++) {
    const code = path.charCodeAt(i);
    if (code < 32 || code === DEL) return REFUSED.control_character;
    if (code === BACKSLASH) return REFUSED.backslash;
    if (code === SEMICOLON) return REFUSED.path_parameter;
    if (code === HASH) return REFUSED.fragment;
    if (code === PERCENT) normalize = true;
    else if (previous === SLASH) {
      if (code === SLASH) normalize = true;
      else if (code === DOT && dotSegmentCandidate(path.charCodeAt(i + 1))) normalize = true;
    }
    previous = code;
  }
  return normalize ? slowPath(path) : path;
}

/** After a "." that starts a segment: what makes it "." or "..". NaN at the end. */
function dotSegmentCandidate(next: number): boolean {
  return Number.isNaN(next) || next === SLASH || next === DOT;
}

function slowPath(path: string): string | PathRefused {
  const parts = path.split("/");
  const kept: string[] = [];
  // A path whose last segment is empty, "." or ".." names a directory: it keeps its final "/".
  let trailingSlash = false;
  for (let i = 1; i < parts.length; i++) {
    const segment = decodeSegment(parts[i]!);
    if (typeof segment !== "string") return segment;
    if (segment === "" || segment === ".") {
      trailingSlash = true;
    } else if (segment === "..") {
      kept.pop();
      trailingSlash = true;
    } else if (isDotWithParameter(segment)) {
      return REFUSED.dot_segment_parameter;
    } else {
      kept.push(segment);
      trailingSlash = false;
    }
  }
  if (kept.length === 0) return "/";
  const joined = "/" + kept.join("/");
  return trailingSlash ? joined + "/" : joined;
}

/** "." or ".." followed by ";" still encoded as %3B (";" is reserved; a raw one was refused). */
function isDotWithParameter(segment: string): boolean {
  const rest = segment.startsWith("..") ? 2 : segment.startsWith(".") ? 1 : 0;
  if (rest === 0) return false;
  return segment.startsWith("%3B", rest);
}

/** One segment with unreserved characters decoded and other escapes upper-cased. */
function decodeSegment(segment: string): string | PathRefused {
  if (!segment.includes("%")) return segment;
  let out = "";
  let from = 0;
  let at = segment.indexOf("%");
  while (at >= 0) {
    out += segment.slice(from, at);
    const run = escapeRun(segment, at);
    if (typeof run !== "number") return run;
    // A run of escaped bytes of 0x80 and above must be whole UTF-8 characters: an overlong form
    // such as %C0%AE ("." to a lenient decoder) would otherwise slip past dot-segment removal.
    if (hexByte(segment, at + 1) >= 0x80 && !isUtf8(escapedBytes(segment, at, run))) {
      return REFUSED.bad_percent_encoding;
    }
    for (let i = at; i < run; i += 3) {
      const byte = hexByte(segment, i + 1);
      if (byte === SLASH) return REFUSED.encoded_slash;
      if (byte === BACKSLASH) return REFUSED.backslash;
      if (byte < 32 || byte === DEL) return REFUSED.control_character;
      out += isUnreserved(byte)
        ? String.fromCharCode(byte)
        : "%" + segment.slice(i + 1, i + 3).toUpperCase();
    }
    from = run;
    at = segment.indexOf("%", from);
  }
  return out + segment.slice(from);
}

/**
 * The end of the run of escapes starting at `at`: one "%XX", or a run of them when the first
 * encodes a byte of 0x80 or above (a multi-byte UTF-8 character). A refusal when one is invalid.
 */
function escapeRun(segment: string, at: number): number | PathRefused {
  const first = hexByte(segment, at + 1);
  if (first < 0) return REFUSED.bad_percent_encoding;
  let end = at + 3;
  if (first < 0x80) return end;
  while (segment.charCodeAt(end) === PERCENT) {
    const byte = hexByte(segment, end + 1);
    if (byte < 0) return REFUSED.bad_percent_encoding;
    if (byte < 0x80) break;
    end += 3;
  }
  return end;
}

function escapedBytes(segment: string, from: number, to: number): Buffer {
  const bytes = Buffer.allocUnsafe((to - from) / 3);
  for (let i = from, j = 0; i < to; i += 3, j++) bytes[j] = hexByte(segment, i + 1);
  return bytes;
}

/** The byte two hex digits at `at` encode, or -1. */
function hexByte(text: string, at: number): number {
  const high = hexDigit(text.charCodeAt(at));
  const low = hexDigit(text.charCodeAt(at + 1));
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

function hexDigit(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  const lower = code | 0x20;
  if (lower >= 97 && lower <= 102) return lower - 87;
  return -1;
}

/** RFC 3986 section 2.3: ALPHA DIGIT "-" "." "_" "~". */
function isUnreserved(byte: number): boolean {
  const lower = byte | 0x20;
  return (
    (lower >= 97 && lower <= 122) ||
    (byte >= 48 && byte <= 57) ||
    byte === 45 ||
    byte === DOT ||
    byte === 95 ||
    byte === 126
  );
}

function refusal(reason: PathRefusal): PathRefused {
  return Object.freeze({ ok: false, reason });
}
