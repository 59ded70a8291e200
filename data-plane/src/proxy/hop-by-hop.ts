// RFC 9110 section 7.6.1: these describe one connection, not the message, so a proxy never
// forwards them. "expect" is answered by node:http itself (100-continue) and undici refuses it.
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/**
 * Header names the Connection header lists (also hop-by-hop), or undefined when it lists
 * none beyond keep-alive/close: the common case parses nothing and allocates nothing.
 */
export function connectionTokens(
  connection: string | string[] | undefined,
): ReadonlySet<string> | undefined {
  if (connection === undefined) return undefined;
  const value = typeof connection === "string" ? connection : connection.join(",");
  if (value.length <= 10) {
    const lower = value.toLowerCase();
    if (lower === "keep-alive" || lower === "close") return undefined;
  }
  let tokens: Set<string> | undefined;
  for (const part of value.split(",")) {
    const token = part.trim().toLowerCase();
    if (token === "" || token === "keep-alive" || token === "close") continue;
    tokens ??= new Set();
    tokens.add(token);
  }
  return tokens;
}

/** True for a lower-case header name that must not cross the proxy in either direction. */
export function isHopByHop(name: string, named: ReadonlySet<string> | undefined): boolean {
  return HOP_BY_HOP.has(name) || name.startsWith("proxy-") || named?.has(name) === true;
}
