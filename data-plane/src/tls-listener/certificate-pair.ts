import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext, type SecureContext } from "node:tls";

/** A certificate and key the proxy listener serves, read and checked. */
export interface LoadedCertificate {
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: string;
  readonly key: string;
  readonly context: SecureContext;
  /** Lower-case DNS names of the certificate's SAN ("*.example.com" kept as written). */
  readonly names: readonly string[];
  /** The leaf's SHA-256 fingerprint, for log lines. */
  readonly fingerprint: string;
  readonly validTo: string;
}

export type LoadResult = { ok: true; value: LoadedCertificate } | { ok: false; reason: string };

/** The floor the proxy listener accepts; TLS 1.0 and 1.1 are deprecated (RFC 8996). */
export const MIN_TLS_VERSION = "TLSv1.2";

type ReadFile = (path: string) => string;

/**
 * Reads a PEM certificate (chain) and its key and checks what a client would otherwise find
 * out at handshake time: both parse, the key is the certificate's, and the certificate is
 * within its validity period. Never throws: a refusal's reason names the file.
 */
export function loadCertificatePair(
  certFile: string,
  keyFile: string,
  now: Date = new Date(),
  readFile: ReadFile = (path) => readFileSync(path, "utf8"),
): LoadResult {
  let cert: string;
  let key: string;
  try {
    cert = readFile(certFile);
  } catch (error) {
    return { ok: false, reason: `cannot read ${certFile}: ${codeOf(error)}` };
  }
  try {
    key = readFile(keyFile);
  } catch (error) {
    return { ok: false, reason: `cannot read ${keyFile}: ${codeOf(error)}` };
  }
  if (!cert.includes("-----BEGIN CERTIFICATE-----")) {
    return { ok: false, reason: `${certFile} holds no PEM certificate` };
  }
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
  } catch (error) {
    return { ok: false, reason: `${certFile} does not parse: ${(error as Error).message}` };
  }
  try {
    if (!leaf.checkPrivateKey(createPrivateKey(key))) {
      return { ok: false, reason: `${keyFile} is not the key of the certificate in ${certFile}` };
    }
  } catch (error) {
    return {
      ok: false,
      reason: `${keyFile} holds no usable private key: ${(error as Error).message}`,
    };
  }
  if (new Date(leaf.validTo) <= now || new Date(leaf.validFrom) > now) {
    return {
      ok: false,
      reason: `${certFile} is not valid now (${leaf.validFrom} to ${leaf.validTo})`,
    };
  }
  let context: SecureContext;
  try {
    context = createSecureContext({ cert, key, minVersion: MIN_TLS_VERSION });
  } catch (error) {
    return { ok: false, reason: `${certFile} is refused by OpenSSL: ${(error as Error).message}` };
  }
  return {
    ok: true,
    value: Object.freeze({
      certFile,
      keyFile,
      cert,
      key,
      context,
      names: Object.freeze(dnsNames(leaf.subjectAltName)),
      fingerprint: leaf.fingerprint256,
      validTo: leaf.validTo,
    }),
  };
}

/** "DNS:a.example, IP Address:127.0.0.1, DNS:*.b.example" -> ["a.example", "*.b.example"]. */
function dnsNames(subjectAltName: string | undefined): string[] {
  if (subjectAltName === undefined) return [];
  const names: string[] = [];
  for (const part of subjectAltName.split(",")) {
    const entry = part.trim();
    if (entry.startsWith("DNS:")) names.push(entry.slice(4).toLowerCase());
  }
  return names;
}

function codeOf(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? (error as Error).message;
}
