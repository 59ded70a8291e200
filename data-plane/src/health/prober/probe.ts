import { connect, isIP } from "node:net";
// The leaf module, not the @clawgate/proto barrel: the barrel loads the whole config model
// (zod schemas, protobuf descriptors), about 18 MiB of resident memory in the probe thread.
import { requestPathProblem } from "@clawgate/proto/origin-form";
import { isTlsFailureCode } from "../../errors/tls-failure-code.js";
import type { LookupFunction } from "../../upstream/node-resolver.js";
import type { ProbeEvidence, ProbeSpec, ProbeTls } from "./probe-protocol.js";
import { ProbeSecureContexts } from "./probe-secure-contexts.js";

/**
 * How probes resolve node names: the lookup over the dnsServers setting, so a probe reaches
 * the address requests reach; undefined (the system resolver) without the setting. Set once
 * when the probe thread starts (setProbeLookup), before any probe runs.
 */
let nameLookup: { lookup?: LookupFunction } = {};

/** Probes resolve names with `lookup` from now on (the probe thread's dnsServers). */
export function setProbeLookup(lookup: LookupFunction | undefined): void {
  nameLookup = lookup === undefined ? {} : { lookup };
}

/**
 * node:http, node:https and node:tls, imported by the first probe that needs them. Most health
 * checks are TCP only (no path, plaintext): their probe thread then never loads them, where
 * compiling them was about a fifth of the thread's CPU at boot (60 ms of 300 in bench:scale,
 * per data plane, while ten of them boot on two cores). Static imports would compile them in
 * every probe thread's own isolate at its start. The first probe to need one waits for it
 * within its deadline (loadedBy), as for any other part of the probe: a probe holds one of the
 * thread's probe slots until it ends, so its timeout is the longest it may hold one, and a load
 * slowed by a busy machine must not stretch it. Counted, not loaded before the clock starts, so
 * timeoutMs stays what ProbeSpec says it is (the whole probe); the load is milliseconds of a
 * timeout of seconds (3 s by default).
 */
/** A module imported by the first probe that needs it; `value` once it is loaded. */
interface LazyModule<T> {
  value: T | undefined;
  loading: Promise<T> | undefined;
  readonly load: () => Promise<T>;
}

function lazyModule<T>(load: () => Promise<T>): LazyModule<T> {
  return { value: undefined, loading: undefined, load };
}

const httpModule = lazyModule(() => import("node:http"));
const httpsModule = lazyModule(() => import("node:https"));
const tlsModule = lazyModule(() => import("node:tls"));

/**
 * The module, once loaded and with time left before `deadline` (performance.now() time);
 * undefined when the deadline comes first (the load goes on for the next probe). Once loaded,
 * a probe takes it at once, with no race and no timer.
 */
async function loadedBy<T>(module: LazyModule<T>, deadline: number): Promise<T | undefined> {
  if (module.value === undefined) {
    module.loading ??= module.load().then((value) => {
      module.value = value;
      return value;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), Math.max(0, deadline - performance.now()));
    });
    try {
      await Promise.race([module.loading, late]);
    } finally {
      clearTimeout(timer);
    }
  }
  return performance.now() < deadline ? module.value : undefined;
}

/** Largest health body read; a health endpoint has no reason to send more. */
export const MAX_PROBE_BODY_BYTES = 64 * 1024;

export interface ProbeOutcome {
  readonly ok: boolean;
  readonly evidence: ProbeEvidence;
  readonly durationMs: number;
}

type Stage<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * Probes one node: a TCP connect as the fast screen, then (when a path is set) `GET <path>` over
 * a fresh connection that must answer 2xx and, when `expectStatus` is set, JSON whose `status`
 * equals it (seed 000 section 3.2: TCP is the coarse sieve, /healthz the fine one). One deadline
 * covers both stages. An upstream with TLS is probed over TLS with its own settings (a TCP-only
 * check then completes a handshake), so a node whose certificate requests would refuse is
 * evicted; such a failure's evidence starts with "tls". Never throws: every failure is a tagged
 * outcome with its evidence.
 */
export async function probeNode(spec: ProbeSpec): Promise<ProbeOutcome> {
  const started = performance.now();
  const deadline = started + spec.timeoutMs;
  const evidence: ProbeEvidence = {};
  const done = (ok: boolean): ProbeOutcome => ({
    ok,
    evidence,
    durationMs: performance.now() - started,
  });

  // The compiler refuses a snapshot with such a path; this guards every other way a spec can
  // arrive, so a request line is only ever written from a path checked here.
  const pathProblem = spec.path === "" ? undefined : requestPathProblem(spec.path, { query: true });
  if (pathProblem !== undefined) {
    evidence.error = `health check path ${pathProblem}; not sent`;
    return done(false);
  }

  const tcp = await tcpConnect(spec.host, spec.port, spec.timeoutMs);
  if (!tcp.ok) {
    evidence.error = tcp.error;
    return done(false);
  }
  evidence.tcpMs = tcp.value;
  const tls = spec.tls;
  if (spec.path === "" && tls === undefined) return done(true);

  if (spec.path === "" && tls !== undefined) {
    const handshake = await tlsHandshake(spec.host, spec.port, tls, deadline);
    if (!handshake.ok) evidence.error = handshake.error;
    return done(handshake.ok);
  }
  const http = await httpCheck(spec, deadline, evidence);
  if (!http.ok) evidence.error = http.error;
  return done(http.ok);
}

/** Resolves with the connect time in ms; the socket is closed at once. */
function tcpConnect(host: string, port: number, timeoutMs: number): Promise<Stage<number>> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect({ host, port, ...nameLookup });
    let settled = false;
    const finish = (result: Stage<number>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => finish({ ok: false, error: "connect timeout" }), timeoutMs);
    socket.once("connect", () => finish({ ok: true, value: performance.now() - started }));
    // `on`, not `once`: a late error after destroy must still have a listener.
    socket.on("error", (err: NodeJS.ErrnoException) =>
      finish({ ok: false, error: err.code ?? err.message }),
    );
  });
}

/**
 * Fills `evidence.httpStatus` and `evidence.bodyStatus` as far as the exchange got; ends by
 * `deadline` (performance.now() time), the module's first load included.
 */
async function httpCheck(
  spec: ProbeSpec,
  deadline: number,
  evidence: ProbeEvidence,
): Promise<Stage<undefined>> {
  const timedOut: Stage<undefined> = { ok: false, error: "http timeout" };
  // agent: false and Connection: close give every probe a fresh connection, so a probe never
  // rides a pooled socket that hides a node that stopped accepting new ones.
  const headers: Record<string, string> = {
    connection: "close",
    accept: "application/json",
    "user-agent": "clawgate-probe",
  };
  const tls = spec.tls;
  // A virtual-hosted node answers for the name its certificate carries.
  if (tls?.servername !== undefined) headers.host = tls.servername;
  const options = {
    host: spec.host,
    port: spec.port,
    path: spec.path,
    method: "GET",
    agent: false as const,
    headers,
    ...nameLookup,
  };
  let req: ReturnType<typeof import("node:http").request>;
  if (tls === undefined) {
    const http = await loadedBy(httpModule, deadline);
    if (http === undefined) return timedOut;
    req = http.request(options);
  } else {
    const https = await loadedBy(httpsModule, deadline);
    const tlsLoaded = await loadedBy(tlsModule, deadline);
    if (https === undefined || tlsLoaded === undefined) return timedOut;
    req = https.request({ ...options, ...tlsOptions(spec.host, tls, tlsLoaded) });
  }
  // Its events are listened to below, in this same turn, before any can be emitted.
  const timeoutMs = deadline - performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: Stage<undefined>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => finish(timedOut), Math.max(0, timeoutMs));
    req.on("error", (err: NodeJS.ErrnoException) => finish({ ok: false, error: errorText(err) }));
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      evidence.httpStatus = status;
      const statusOk = status >= 200 && status < 300;
      if (spec.expectStatus === "") {
        finish(statusOk ? { ok: true, value: undefined } : { ok: false, error: `http ${status}` });
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_PROBE_BODY_BYTES) {
          finish({ ok: false, error: statusOk ? "body over 64 KiB" : `http ${status}` });
          return;
        }
        chunks.push(chunk);
      });
      res.on("error", (err: NodeJS.ErrnoException) =>
        finish({ ok: false, error: err.code ?? err.message }),
      );
      res.on("end", () => {
        const body = bodyStatus(Buffer.concat(chunks).toString("utf8"));
        if (body.ok) evidence.bodyStatus = body.value;
        if (!statusOk) finish({ ok: false, error: `http ${status}` });
        else if (!body.ok) finish(body);
        else if (body.value !== spec.expectStatus) {
          finish({ ok: false, error: `status ${JSON.stringify(body.value)}` });
        } else finish({ ok: true, value: undefined });
      });
    });
    req.end();
  });
}

/**
 * A TLS handshake with the upstream's settings, closed at once: TCP-only checks over TLS. Ends
 * by `deadline` (performance.now() time), the module's first load included.
 */
async function tlsHandshake(
  host: string,
  port: number,
  tls: ProbeTls,
  deadline: number,
): Promise<Stage<undefined>> {
  const loaded = await loadedBy(tlsModule, deadline);
  if (loaded === undefined) return { ok: false, error: "tls timeout" };
  const { connect: tlsConnect } = loaded;
  const timeoutMs = deadline - performance.now();
  return new Promise((resolve) => {
    const socket = tlsConnect({ host, port, ...tlsOptions(host, tls, loaded), ...nameLookup });
    let settled = false;
    const finish = (result: Stage<undefined>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(
      () => finish({ ok: false, error: "tls timeout" }),
      Math.max(0, timeoutMs),
    );
    socket.once("secureConnect", () => finish({ ok: true, value: undefined }));
    socket.on("error", (err: NodeJS.ErrnoException) =>
      finish({ ok: false, error: errorText(err) }),
    );
  });
}

/** Built with the probe thread's node:tls once it is loaded (see tlsModule). */
let contexts: ProbeSecureContexts | undefined;

/**
 * tls.connect options, as the proxy's pools dial: SNI is `servername`, else the node's host when
 * it is a name (undici's default; a server choosing its certificate by SNI must hand the probe
 * the one requests get), and an IP literal gets none (RFC 6066). The file set's SecureContext is
 * built once (ProbeSecureContexts) and carries the TLSv1.2 floor.
 */
function tlsOptions(host: string, tls: ProbeTls, module: typeof import("node:tls")) {
  contexts ??= new ProbeSecureContexts(({ ca, cert, key }) =>
    module.createSecureContext({ ca, cert, key, minVersion: "TLSv1.2" }),
  );
  const servername = tls.servername ?? (isIP(host) === 0 ? host : undefined);
  return {
    ...(servername === undefined ? {} : { servername }),
    secureContext: contexts.get(tls.files),
    rejectUnauthorized: tls.rejectUnauthorized,
  };
}

/** "ECONNREFUSED", or "tls CERT_HAS_EXPIRED" for a refused handshake or certificate. */
function errorText(err: NodeJS.ErrnoException): string {
  const code = err.code;
  if (code === undefined) return err.message;
  return isTlsFailureCode(code) ? `tls ${code}` : code;
}

function bodyStatus(text: string): Stage<string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, error: "body is not JSON" };
  }
  if (typeof parsed !== "object" || parsed === null) {
    return { ok: false, error: "body is not a JSON object" };
  }
  const status = (parsed as { status?: unknown }).status;
  if (typeof status !== "string") return { ok: false, error: "body has no string status" };
  return { ok: true, value: status };
}
