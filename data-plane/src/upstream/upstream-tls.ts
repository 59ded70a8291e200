import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { ConfigProblem, Upstream } from "@clawgate/proto";

/**
 * What `tls.connect` needs to dial an upstream's nodes: plain strings and booleans only, so the
 * same object configures the proxy's pools and crosses to the probe worker by structured clone.
 */
export interface UpstreamTlsOptions {
  /** SNI and the name checked; undefined lets the dialler use the node's host when it is a name. */
  readonly servername?: string;
  /** PEM CA bundle; undefined trusts Node's root store (plus NODE_EXTRA_CA_CERTS). */
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly rejectUnauthorized: boolean;
  /** Identifies these settings and file contents: pools built with other ones are not reused. */
  readonly id: string;
}

/** Thrown by compileUpstream when a file the upstream names cannot be used; the snapshot is NACKed. */
export class UpstreamFileError extends Error {
  readonly code = "CLAWGATE_UPSTREAM_FILE";
  constructor(readonly problems: ConfigProblem[]) {
    super(problems.map((p) => `${p.field} ${p.message}`).join("; "));
  }
}

/**
 * Reads the files an upstream's `tls` names, on this machine, as the snapshot is compiled: a
 * renewed certificate is picked up by the next snapshot, and one that cannot be read refuses
 * the snapshot (naming the field and path) instead of failing every request later.
 * Undefined when the upstream is plaintext.
 */
export function loadUpstreamTls(upstream: Upstream): UpstreamTlsOptions | undefined {
  const tls = upstream.tls;
  if (tls === undefined || !tls.enabled) return undefined;
  const problems: ConfigProblem[] = [];
  const read = (field: string, path: string, marker: string): string | undefined => {
    if (path === "") return undefined;
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "unreadable";
      problems.push(problem(upstream.name, field, `cannot read ${path} (${code})`));
      return undefined;
    }
    if (!text.includes(marker)) {
      problems.push(problem(upstream.name, field, `${path} holds no PEM ${describe(marker)}`));
      return undefined;
    }
    return text;
  };
  const ca = read("tls.caFile", tls.caFile, "-----BEGIN CERTIFICATE-----");
  const cert = read("tls.clientCertFile", tls.clientCertFile, "-----BEGIN CERTIFICATE-----");
  const key = read("tls.clientKeyFile", tls.clientKeyFile, "PRIVATE KEY-----");
  if (problems.length === 0) {
    try {
      // Parses what was read as OpenSSL will: a broken PEM or a key that is not the
      // certificate's is refused here, with the snapshot, not on the first request.
      createSecureContext({ ca, cert, key });
    } catch (error) {
      const field = cert !== undefined ? "tls.clientCertFile" : "tls.caFile";
      problems.push(problem(upstream.name, field, `is not usable: ${(error as Error).message}`));
    }
  }
  if (problems.length > 0) throw new UpstreamFileError(problems);
  const rejectUnauthorized = !tls.insecureSkipVerify;
  const servername = tls.serverName === "" ? undefined : tls.serverName;
  const id = createHash("sha256")
    .update(JSON.stringify([servername, ca, cert, key, rejectUnauthorized]))
    .digest("hex")
    .slice(0, 16);
  return Object.freeze({ servername, ca, cert, key, rejectUnauthorized, id });
}

function problem(name: string, field: string, message: string): ConfigProblem {
  return { kind: "upstreams", name, field, message };
}

function describe(marker: string): string {
  return marker.includes("KEY") ? "private key" : "certificate";
}
