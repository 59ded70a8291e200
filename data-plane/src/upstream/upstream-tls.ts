import { createHash } from "node:crypto";
import type { SecureContext } from "node:tls";
import type { ConfigProblem, Upstream } from "@clawgate/proto";
import type { ProbeTls } from "../health/prober/probe-protocol.js";
import {
  type TlsContextCache,
  type TlsFileStat,
  upstreamTlsContexts,
} from "./tls-context-cache.js";

/**
 * How an upstream's nodes are dialled over TLS: the files' one shared SecureContext (built once
 * per file set, see TlsContextCache) plus the per-connection settings.
 */
export interface UpstreamTlsOptions {
  /** SNI and the name checked; undefined lets the dialler use the node's host when it is a name. */
  readonly servername?: string;
  /** CA, client certificate and key, parsed once; Node's root store when no caFile is set. */
  readonly secureContext: SecureContext;
  readonly rejectUnauthorized: boolean;
  /** Identifies these settings and file contents: pools built with other ones are not reused. */
  readonly id: string;
  /** The files as read (path and stat), so a change that lands during a compile is seen. */
  readonly files: readonly TlsFileStat[];
  /**
   * The same settings for the probe thread: a SecureContext cannot cross threads, so it gets
   * the PEM text (one object per file set) and builds its own context once per set.
   */
  readonly probe: ProbeTls;
}

/** Thrown by compileUpstream when a file the upstream names cannot be used; the snapshot is NACKed. */
export class UpstreamFileError extends Error {
  readonly code = "CLAWGATE_UPSTREAM_FILE";
  constructor(readonly problems: ConfigProblem[]) {
    super(problems.map((p) => `${p.field} ${p.message}`).join("; "));
  }
}

/**
 * The TLS an upstream's `tls` asks for, its files read on this machine as the snapshot is
 * compiled (once per file set while the files stay the same: see TlsContextCache): a renewed
 * certificate is picked up by the next snapshot, and one that cannot be read refuses the
 * snapshot (naming the field and path) instead of failing every request later.
 * Undefined when the upstream is plaintext.
 */
export function loadUpstreamTls(
  upstream: Upstream,
  cache: TlsContextCache = upstreamTlsContexts,
): UpstreamTlsOptions | undefined {
  const tls = upstream.tls;
  if (tls === undefined || !tls.enabled) return undefined;
  const loaded = cache.load(tls);
  if (!loaded.ok) {
    throw new UpstreamFileError(
      loaded.problems.map(({ field, message }) => ({
        kind: "upstreams",
        name: upstream.name,
        field,
        message,
      })),
    );
  }
  const files = loaded.value;
  const rejectUnauthorized = !tls.insecureSkipVerify;
  const servername = tls.serverName === "" ? undefined : tls.serverName;
  const id = createHash("sha256")
    .update(JSON.stringify([servername, files.contentHash, rejectUnauthorized]))
    .digest("hex")
    .slice(0, 16);
  const probe: ProbeTls = Object.freeze({ servername, files: files.pem, rejectUnauthorized });
  return Object.freeze({
    servername,
    secureContext: files.secureContext,
    rejectUnauthorized,
    id,
    files: files.files,
    probe,
  });
}
