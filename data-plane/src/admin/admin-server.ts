import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Registry } from "prom-client";
import type { ErrorCode } from "../errors/error-catalog.js";
import type { AppliedState } from "../runtime/applied-snapshot.js";
import { redactedSnapshotJson } from "./redact-snapshot.js";

export interface AdminOptions {
  /** prom-client registry served at /metrics. */
  registry: Pick<Registry, "metrics" | "contentType">;
  /** The applied-snapshot holder; /readyz and /config_dump read it. */
  applied: { state(): AppliedState | undefined };
}

type AdminHandler = (req: IncomingMessage, res: ServerResponse) => void;

const NOT_READY: ErrorCode = "CLAWGATE_NOT_READY";

/**
 * The admin endpoints: /metrics, /healthz (the process answers), /readyz (a snapshot is
 * applied, so the proxy can route), /config_dump (the applied snapshot). Both of the last two
 * say whether the snapshot came from a control plane or the disk cache. Kept apart from
 * listen() so tests can drive it on any server.
 */
export function createAdminHandler(options: AdminOptions): AdminHandler {
  const routes: Record<string, (res: ServerResponse) => void | Promise<void>> = {
    "/metrics": async (res) => {
      const text = await options.registry.metrics();
      send(res, 200, text, options.registry.contentType);
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
    const path = (req.url ?? "/").split("?", 1)[0]!;
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
    Promise.resolve(route(res)).catch((err: unknown) => {
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
