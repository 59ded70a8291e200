/*
 * RFC 9112 section 3.2: a request with more than one Host field line, or with a Host whose
 * value is not a valid uri-host[:port], must get 400. node:http keeps only the first Host in
 * req.headers, so two clients that disagree on the host (a front proxy reading the last line,
 * Clawgate the first) would route one request two ways. Checked on every request, so this
 * reads the raw header list the parser already built and allocates nothing.
 */

// uri-host characters (RFC 3986 reg-name: unreserved, pct-encoded, sub-delims), by char code.
const REG_NAME = new Uint8Array(128);
for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$&'()*+,;=") {
  REG_NAME[c.charCodeAt(0)] = 1;
}
// Inside "[...]": IPv6 and IPv4-mapped literals.
const IP_LITERAL = new Uint8Array(128);
for (const c of "0123456789abcdefABCDEF:.") IP_LITERAL[c.charCodeAt(0)] = 1;

const COLON = 58;
const DOT = 46;
/** RFC 1035 section 2.3.4: a name of at most 253 characters (254 with the root's dot), labels of 63. */
const MAX_HOST_NAME = 254;
const MAX_LABEL = 63;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
const MAX_PORT = 65_535;

/** True when the raw header list (name, value, name, value, ...) holds Host more than once. */
export function hasRepeatedHost(rawHeaders: readonly string[]): boolean {
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!isHostName(rawHeaders[i]!)) continue;
    if (seen) return true;
    seen = true;
  }
  return false;
}

/** "host" in any case, without allocating a lower-cased copy; ORing 0x20 folds A-Z to a-z. */
function isHostName(name: string): boolean {
  return (
    name.length === 4 &&
    (name.charCodeAt(0) | 0x20) === 104 /* h */ &&
    (name.charCodeAt(1) | 0x20) === 111 /* o */ &&
    (name.charCodeAt(2) | 0x20) === 115 /* s */ &&
    (name.charCodeAt(3) | 0x20) === 116 /* t */
  );
}

/**
 * True for a Host value the proxy can route on: a reg-name or a bracketed IP literal,
 * optionally followed by ":" and a port of at most 5 digits up to 65535 (an empty port is
 * allowed by RFC 3986). An empty value is left to the route table (it matches host-less routes).
 * A name must also be one DNS could hold: at most 253 characters (one trailing "." more), no
 * empty label ("a..b", ".a"), no label over 63; a longer one names no host a route can have,
 * and the wildcard match would hash every suffix of it (review 20c, Medium 4).
 */
export function isValidHostValue(value: string): boolean {
  const length = value.length;
  let i = 0;
  if (length > 0 && value.charCodeAt(0) === OPEN_BRACKET) {
    i = 1;
    while (i < length && value.charCodeAt(i) !== CLOSE_BRACKET) {
      const c = value.charCodeAt(i);
      if (c >= 128 || IP_LITERAL[c] !== 1) return false;
      i++;
    }
    // An unclosed "[" or an empty "[]" is no address.
    if (i === length || i === 1) return false;
    i++;
  } else {
    let labelStart = 0;
    while (i < length && value.charCodeAt(i) !== COLON) {
      const c = value.charCodeAt(i);
      if (c >= 128 || REG_NAME[c] !== 1) return false;
      if (c === DOT) {
        if (i === labelStart || i - labelStart > MAX_LABEL) return false;
        labelStart = i + 1;
      }
      i++;
    }
    // ":80" names no host.
    if (i === 0 && length > 0) return false;
    // The last label ("." at the end, an FQDN, leaves an empty one, which is allowed).
    if (i - labelStart > MAX_LABEL || i > MAX_HOST_NAME) return false;
    if (i === MAX_HOST_NAME && value.charCodeAt(i - 1) !== DOT) return false;
  }
  if (i === length) return true;
  if (value.charCodeAt(i) !== COLON) return false;
  const digits = length - i - 1;
  if (digits > 5) return false;
  let port = 0;
  for (let j = i + 1; j < length; j++) {
    const c = value.charCodeAt(j) - 48;
    if (c < 0 || c > 9) return false;
    port = port * 10 + c;
  }
  return port <= MAX_PORT;
}

/** True when a request's Host field lines must be refused with 400 (see the file comment). */
export function badHostField(rawHeaders: readonly string[], host: string | undefined): boolean {
  return (host !== undefined && !isValidHostValue(host)) || hasRepeatedHost(rawHeaders);
}
