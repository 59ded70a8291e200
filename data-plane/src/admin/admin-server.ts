import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { ErrorCode } from "../errors/error-catalog.js";
import type { MetricsSource } from "../metrics/metrics-source.js";
import type { AppliedState } from "../runtime/applied-snapshot.js";
import { redactedSnapshotJson } from "./redact-snapshot.js";

export interface AdminOptions {
  /** What /metrics serves (`metricsSource`: the prom-client registry plus the per-node series). */
  registry: MetricsSource;
  /** The applied-snapshot holder; /readyz and /config_dump read it. */
  applied: { state(): AppliedState | undefined };
}

type AdminHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A Prometheus metric name, as the text format allows it. */
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

const NOT_READY: ErrorCode = "CLAWGATE_NOT_READY";

/**
 * The admin endpoints: /metrics, /healthz (the process answers), /readyz (a snapshot is
 * applied, so the proxy can route), /config_dump (the applied snapshot). Both of the last two
 * say whether the snapshot came from a control plane or the disk cache. Kept apart from
 * listen() so tests can drive it on any server.
 */
export function createAdminHandler(options: AdminOptions): AdminHandler {
  const routes: Record<
    string,
    (res: ServerResponse, query: URLSearchParams) => void | Promise<void>
  > = {
    // `?name=<family>` (repeatable) serves only those families: reading one gauge (the
    // event-loop lag) then costs nothing, where the whole text at 20,000 nodes is megabytes.
    "/metrics": async (res, query) => {
      const asked = query.getAll("name");
      const bad = asked.find((name) => !METRIC_NAME.test(name));
      if (bad !== undefined) {
        sendJson(res, 400, {
          error: {
            code: "CLAWGATE_ADMIN_BAD_REQUEST",
            message: `name ${JSON.stringify(bad)} is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)`,
          },
        });
        return;
      }
      const chunks = options.registry.chunks(asked.length === 0 ? undefined : new Set(asked));
      await sendChunks(res, chunks, options.registry.contentType);
    },
    "/healthz": (res) => sendJson(res, 200, { status: "ok" }),
    "/readyz": (res) => {
      const state = options.applied.state();
      if (state === undefined) {
        sendJson(res, 503, { status: "not ready", reason: "no snapshot applied yet" });
        return;
      }
      sendJson(res, 200, {
        status: "ready",
        version: state.compiled.version,
        source: state.source,
      });
    },
    "/config_dump": (res) => {
      const state = options.applied.state();
      if (state === undefined) {
        sendJson(res, 503, { error: { code: NOT_READY, message: "no snapshot applied yet" } });
        return;
      }
      sendJson(res, 200, {
        version: state.compiled.version,
        appliedAt: new Date(state.appliedAtMs).toISOString(),
        appliedAtMs: state.appliedAtMs,
        source: state.source,
        snapshot: redactedSnapshotJson(state.compiled.source),
      });
    },
  };

  return (req, res) => {
    const url = req.url ?? "/";
    const queryAt = url.indexOf("?");
    const path = queryAt === -1 ? url : url.slice(0, queryAt);
    const search = queryAt === -1 ? "" : url.slice(queryAt + 1);
    // The path is the client's: own keys only, never a member of Object.prototype.
    const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
    if (route === undefined) {
      sendJson(res, 404, { error: { code: "CLAWGATE_ADMIN_NOT_FOUND", message: `no ${path}` } });
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("allow", "GET, HEAD");
      sendJson(res, 405, {
        error: { code: "CLAWGATE_METHOD_NOT_ALLOWED", message: `${path} answers GET` },
      });
      return;
    }
    Promise.resolve(route(res, new URLSearchParams(search))).catch((err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      if (!res.headersSent)
        sendJson(res, 500, { error: { code: "CLAWGATE_ADMIN_FAILED", message } });
      else res.destroy();
    });
  };
}

/** An http.Server serving the admin endpoints; the caller binds it (loopback by default). */
export function createAdminServer(options: AdminOptions): Server {
  return createServer(createAdminHandler(options));
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  send(res, status, JSON.stringify(body), "application/json; charset=utf-8");
}

function send(res: ServerResponse, status: number, body: string, contentType: string): void {
  res.writeHead(status, {
    "content-type": contentType,
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
  });
  res.end(res.req.method === "HEAD" ? undefined : body);
}

/**
 * Writes `chunks` as a chunked response, each as it comes and after the socket took the last
 * one: a scrape at 20,000 nodes is megabytes, never built into one string.
 */
async function sendChunks(
  res: ServerResponse,
  chunks: AsyncIterable<string>,
  contentType: string,
): Promise<void> {
  const head = res.req.method === "HEAD";
  let started = false;
  for await (const chunk of chunks) {
    if (!started) {
      res.writeHead(200, { "content-type": contentType, "cache-control": "no-store" });
      started = true;
    }
    if (head || chunk === "") continue;
    if (res.write(chunk)) continue;
    // A scraper that hangs up mid-way never drains: stop rendering for it.
    const drained = await Promise.race([
      once(res, "drain").then(() => true),
      once(res, "close").then(() => false),
    ]);
    if (!drained) return;
  }
  if (!started) res.writeHead(200, { "content-type": contentType, "cache-control": "no-store" });
  res.end();
}
