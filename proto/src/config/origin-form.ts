/**
 * Request targets the gateway writes into a request line itself (a health probe's path, a
 * rewritten path prefix). RFC 9112 section 3.2.1 allows only the origin-form there:
 * absolute-path [ "?" query ], where a segment is made of pchar (RFC 3986: unreserved,
 * sub-delims, ":", "@" and %XX). A space, a control character or a raw non-ASCII byte splits
 * or corrupts the request line, so such a path is refused when config is checked, never sent.
 */

/** Longest path accepted: well past any real health or rewrite path, far below header limits. */
export const MAX_REQUEST_PATH_LENGTH = 1024;

// unreserved / sub-delims / ":" / "@"; "%" is checked separately so its reason can be precise.
const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]$/;
const HEX = /^[0-9A-Fa-f]$/;

export interface RequestPathRules {
  /** Accept "?query" after the path (a probe target); default false (a prefix to rewrite to). */
  query?: boolean;
}

/**
 * Why `value` is not an origin-form request target, or undefined when it is one. The reason
 * names the offending character by code point, so a CR or LF never lands raw in a message.
 */
export function requestPathProblem(
  value: string,
  rules: RequestPathRules = {},
): string | undefined {
  if (value.length > MAX_REQUEST_PATH_LENGTH) {
    return `is ${value.length} characters long; at most ${MAX_REQUEST_PATH_LENGTH}`;
  }
  if (!value.startsWith("/")) return 'must start with "/"';
  let inQuery = false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charAt(i);
    if (c === "/" || PCHAR.test(c)) continue;
    if (c === "%") {
      if (HEX.test(value.charAt(i + 1)) && HEX.test(value.charAt(i + 2))) {
        i += 2;
        continue;
      }
      return `has a "%" at ${i} not followed by two hex digits`;
    }
    if (c === "?") {
      if (!rules.query) return `has a "?" at ${i}; a query is not allowed here`;
      // "?" may repeat inside the query (RFC 3986 query = *( pchar / "/" / "?" )).
      inQuery = true;
      continue;
    }
    return `has ${describe(value.codePointAt(i) ?? 0)} at ${i}${inQuery ? " (in the query)" : ""}; percent-encode it`;
  }
  return undefined;
}

/** True for an origin-form target: absolute path and, when `rules.query`, an optional query. */
export function isRequestPath(value: string, rules: RequestPathRules = {}): boolean {
  return requestPathProblem(value, rules) === undefined;
}

function describe(code: number): string {
  const point = `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  if (code === 0x20) return "a space";
  if (code < 0x20 || code === 0x7f) return `a control character (${point})`;
  if (code > 0x7f) return `a non-ASCII character (${point})`;
  return `"${String.fromCharCode(code)}"`;
}
