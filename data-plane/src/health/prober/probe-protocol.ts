/**
 * Messages between the main thread and the probe worker. Plain objects only: they cross the
 * thread boundary by structured clone, so no classes, functions or Maps.
 */

/** What one probe saw; every field is optional because a probe stops at the first failure. */
export interface ProbeEvidence {
  /** Milliseconds the TCP connect took (the fast screen). */
  tcpMs?: number;
  /** Status code of `GET <path>`, when the HTTP stage ran. */
  httpStatus?: number;
  /** The JSON body's `status`, when an expected status was configured and a body was read. */
  bodyStatus?: string;
  /** Why the probe failed ("ECONNREFUSED", "connect timeout", "http 500", ...); absent on success. */
  error?: string;
}

/** How to probe one node; the settings come from the upstream's health check. */
export interface ProbeSpec {
  readonly host: string;
  readonly port: number;
  /** Deadline for the whole probe, TCP connect and HTTP exchange together. */
  readonly timeoutMs: number;
  /** HTTP path probed after the TCP connect; "" probes TCP only. */
  readonly path: string;
  /** When not "", the 2xx body must be JSON whose `status` equals it. */
  readonly expectStatus: string;
  /**
   * The upstream's TLS settings, files already read: the probe dials the way requests do, so a
   * node whose certificate the proxy would refuse is evicted. Undefined for plaintext.
   */
  readonly tls?: ProbeTls | undefined;
}

/**
 * What tls.connect needs; plain values so it survives the structured clone to the worker. The
 * worker builds one SecureContext per `files.contextKey` (probeSecureContext), not one per probe.
 */
export interface ProbeTls {
  readonly servername?: string | undefined;
  readonly files: ProbeTlsFiles;
  readonly rejectUnauthorized: boolean;
}

/**
 * The PEM text of one file set, one object shared by every upstream naming the set, so a
 * message to the worker carries a CA bundle once, however many upstreams use it.
 */
export interface ProbeTlsFiles {
  readonly ca?: string | undefined;
  readonly cert?: string | undefined;
  readonly key?: string | undefined;
  /** Identifies the contents: the worker's SecureContext for them is built once. */
  readonly contextKey: string;
}

/** One node the worker probes every `intervalMs` (jittered by ±10 %). */
export interface ProbeTarget extends ProbeSpec {
  readonly upstream: string;
  /** host:port as configured; with `upstream` the key of the node. */
  readonly address: string;
  readonly intervalMs: number;
}

export type ToWorker =
  | {
      /** Each named upstream's nodes become its list (empty: gone); others are left as they are. */
      readonly type: "upstreams";
      readonly changes: readonly (readonly [string, readonly ProbeTarget[]])[];
    }
  | {
      readonly type: "probe-now";
      readonly upstream: string;
      readonly address: string;
      /** Echoed in the results of every probe that starts after this request. */
      readonly ticket: number;
    };

/** One finished probe, posted by the worker. */
export interface ProbeResult {
  readonly type: "result";
  readonly upstream: string;
  readonly address: string;
  readonly ok: boolean;
  readonly evidence: ProbeEvidence;
  readonly durationMs: number;
  /** Wall-clock epoch ms when the worker finished the probe (Date.now() in the worker). */
  readonly at: number;
  /** The latest probe-now ticket the worker had for this node when the probe started; 0 if none. */
  readonly ticket: number;
}

/** The probes the worker finished in one of its turns, posted together (see `TurnBatch`). */
export interface ProbeResults {
  readonly type: "results";
  readonly results: readonly ProbeResult[];
}

export type FromWorker = ProbeResults;

/** One line for logs and the NodeHealth report: "tcp 0.4ms, http 200, status ok". */
export function formatEvidence(evidence: ProbeEvidence): string {
  const parts: string[] = [];
  if (evidence.tcpMs !== undefined) parts.push(`tcp ${evidence.tcpMs.toFixed(1)}ms`);
  if (evidence.httpStatus !== undefined) parts.push(`http ${evidence.httpStatus}`);
  if (evidence.bodyStatus !== undefined) parts.push(`status ${evidence.bodyStatus}`);
  if (evidence.error !== undefined) parts.push(`error ${evidence.error}`);
  return parts.join(", ");
}
