/**
 * Which of `certificates` serves a TLS client that sent `serverName` (SNI): one whose SAN
 * names it exactly, else one with a wildcard covering exactly its first label
 * ("*.example.com" covers "a.example.com", not "example.com" nor "a.b.example.com", as RFC
 * 6125 section 6.4.3 has clients check it). Undefined: serve the default certificate. The
 * earlier entry wins a tie, so the configured order decides.
 */
export function matchServerName<T extends { readonly names: readonly string[] }>(
  certificates: readonly T[],
  serverName: string,
): T | undefined {
  const name = serverName.toLowerCase();
  for (const certificate of certificates) {
    if (certificate.names.includes(name)) return certificate;
  }
  const dot = name.indexOf(".");
  if (dot <= 0) return undefined;
  const wildcard = `*${name.slice(dot)}`;
  for (const certificate of certificates) {
    if (certificate.names.includes(wildcard)) return certificate;
  }
  return undefined;
}
