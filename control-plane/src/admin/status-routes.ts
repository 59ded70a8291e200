import type { FastifyPluginAsync } from "fastify";
import type { Registry } from "prom-client";
import { z } from "zod";
import type { FleetSource } from "../fleet/data-plane-view.js";
import type { SnapshotStatusSource } from "../snapshot/snapshot-status.js";

export interface StatusRoutesOptions {
  snapshot: SnapshotStatusSource;
  fleet: FleetSource;
  /** Served at /metrics in Prometheus text format; no /metrics route when absent. */
  metrics?: Registry;
  /**
   * True while the process stops: /readyz answers 503. Default never (once close() begins,
   * fastify answers 503 to every request anyway).
   */
  draining?: () => boolean;
}

/** Why the control plane should not be sent traffic yet, or the version it serves. */
function readiness(
  options: StatusRoutesOptions,
): { ready: true; version: number } | { ready: false; reason: string } {
  if (options.draining?.() === true) {
    return { ready: false, reason: "draining: the process is stopping" };
  }
  const { version } = options.snapshot.status();
  const read = options.snapshot.hasReadStore?.() ?? version > 0;
  if (!read) return { ready: false, reason: "the store has not been read yet" };
  return { ready: true, version };
}

const readyzSchema = {
  tags: ["status"],
  summary: "Readiness: the store was read and the process is not draining (no token)",
  response: {
    200: z.object({ status: z.literal("ready"), version: z.int() }),
    503: z.object({ status: z.literal("not ready"), reason: z.string() }),
  },
};

/** Read-only views of the control plane: snapshot, data planes, metrics, liveness, readiness. */
export const statusRoutes: FastifyPluginAsync<StatusRoutesOptions> = async (app, options) => {
  app.get(
    "/v1/snapshot",
    { schema: { tags: ["status"], summary: "Newest config version and whether it is published" } },
    async () => options.snapshot.status(),
  );

  app.get(
    "/v1/dataplanes",
    { schema: { tags: ["status"], summary: "Every data plane and how far it has applied" } },
    async () => ({ items: options.fleet.list() }),
  );

  const registry = options.metrics;
  if (registry !== undefined) {
    app.get(
      "/metrics",
      {
        schema: {
          tags: ["status"],
          summary: "Control-plane metrics in Prometheus text format",
          produces: ["text/plain"],
          response: { 200: z.string() },
        },
      },
      async (_request, reply) => {
        reply.type(registry.contentType);
        return registry.metrics();
      },
    );
  }

  app.get(
    "/healthz",
    {
      schema: {
        tags: ["status"],
        summary: "Liveness: the process answers (no token)",
        response: { 200: z.object({ status: z.literal("ok") }) },
      },
    },
    async () => ({ status: "ok" as const }),
  );

  // Ready once the snapshot builder has read the store, so a data plane that connects is sent
  // the config; a store that cannot be read keeps the replica out of the Service.
  app.get("/readyz", { schema: readyzSchema }, async (_request, reply) => {
    const state = readiness(options);
    reply.header("cache-control", "no-store");
    if (!state.ready) return reply.code(503).send({ status: "not ready", reason: state.reason });
    return { status: "ready", version: state.version };
  });
};
