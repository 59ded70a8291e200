import type { FastifyPluginAsync } from "fastify";
import type { Registry } from "prom-client";
import type { FleetSource } from "../fleet/data-plane-view.js";
import type { SnapshotStatusSource } from "../snapshot/snapshot-status.js";

export interface StatusRoutesOptions {
  snapshot: SnapshotStatusSource;
  fleet: FleetSource;
  /** Served at /metrics in Prometheus text format; no /metrics route when absent. */
  metrics?: Registry;
}

/** Read-only views of the control plane: snapshot, data planes, metrics, liveness. */
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
    app.get("/metrics", { schema: { hide: true } }, async (_request, reply) => {
      reply.type(registry.contentType);
      return registry.metrics();
    });
  }

  app.get("/healthz", { schema: { hide: true } }, async () => ({ status: "ok" }));
};
