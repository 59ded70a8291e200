/**
 * Normalizes a Host header for matching: lower case, port removed, "[v6]" kept in brackets.
 * Allocates only when the header has a port or upper-case letters.
 */
export function normalizeRequestHost(raw: string): string {
  let end = raw.length;
  if (raw.charCodeAt(0) === 91 /* [ */) {
    const close = raw.indexOf("]");
    if (close > 0) end = close + 1;
  } else {
    const colon = raw.indexOf(":");
    if (colon >= 0) end = colon;
  }
  // Some clients send a fully qualified name ("example.com."); it names the same host.
  if (end > 0 && raw.charCodeAt(end - 1) === 46 /* . */) end--;
  const host = end === raw.length ? raw : raw.slice(0, end);
  for (let i = 0; i < host.length; i++) {
    const c = host.charCodeAt(i);
    if (c >= 65 && c <= 90) return host.toLowerCase();
  }
  return host;
}
