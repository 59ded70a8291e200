import { pino } from "pino";
import { Registry } from "prom-client";
import { buildAdminApp } from "./admin/app.js";
import { resolveAdminToken } from "./config/admin-token.js";
import { loadControlPlaneSettings } from "./config/load-settings.js";
import { Fleet } from "./fleet/fleet.js";
import { startSnapshotServer } from "./grpc/snapshot-server.js";
import { exitOnListenFailure, splitHostPort } from "./listen.js";
import { registerControlPlaneMetrics } from "./metrics/control-plane-metrics.js";
import { ConfigService } from "./resources/config-service.js";
import { SnapshotBuilder } from "./snapshot/snapshot-builder.js";
import { openStore } from "./store/open-store.js";

/**
 * Assembles the control plane, in the order data flows: store -> config service (admin writes)
 * and snapshot builder (store -> snapshots) -> gRPC server (snapshots -> data planes) and fleet
 * (data planes' answers) -> admin API and metrics.
 */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  const settings = loadControlPlaneSettings(argv, env);
  const logger = pino({ name: "clawgate-control-plane", level: settings.logLevel });

  const store = await openStore({
    etcdEndpoints: settings.etcdEndpoints,
    embeddedPath: settings.storePath,
  });
  logger.info({ store: store.kind, prefix: settings.etcdPrefix }, "store opened");

  const config = new ConfigService(store, settings.etcdPrefix);
  const builder = new SnapshotBuilder({
    store,
    prefix: settings.etcdPrefix,
    logger,
    instanceId: settings.instanceId,
  });
  await builder.start();

  const fleet = new Fleet({ graceMs: settings.staleGraceMs });
  const metrics = new Registry();
  const controlPlaneMetrics = registerControlPlaneMetrics(metrics, { builder, fleet });

  const grpc = await startSnapshotServer({
    address: settings.grpcListen,
    builder,
    fleet,
    logger,
    metrics: controlPlaneMetrics,
  }).catch(exitOnListenFailure(logger, "gRPC snapshot service", settings.grpcListen));

  const admin = await buildAdminApp({
    config,
    snapshot: builder,
    fleet,
    token: await resolveAdminToken(settings, logger),
    metrics,
    logger,
  });
  const [host, port] = splitHostPort(settings.adminListen);
  await admin
    .listen({ host, port })
    .catch(exitOnListenFailure(logger, "admin API", settings.adminListen));
  logger.info({ address: settings.adminListen }, "admin API listening");

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal }, "shutting down");
    await admin.close();
    await grpc.close();
    await builder.stop();
    await store.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}
