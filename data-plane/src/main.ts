import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { hostname } from "node:os";
import pino, { type Logger } from "pino";
import { Registry } from "prom-client";
import { createAdminServer } from "./admin/admin-server.js";
import type { DataPlaneConfig } from "./config/config-schema.js";
import { loadConfig } from "./config/load-config.js";
import { ProxyMetrics } from "./metrics/proxy-metrics.js";
import { SnapshotMetrics } from "./metrics/snapshot-metrics.js";
import { createProxyHandler } from "./proxy/proxy-handler.js";
import { AppliedSnapshot } from "./runtime/applied-snapshot.js";
import { closeServer } from "./runtime/close-server.js";
import { ListenError, listen } from "./runtime/listen.js";
import { SnapshotClient } from "./snapshot-client/snapshot-client.js";
import { PoolRegistry } from "./upstream/pool-registry.js";

const SOFTWARE_VERSION: string = JSON.parse(
  readFileSync(new URL("../package.json", import.meta.url), "utf8"),
).version;

export interface RunningDataPlane {
  /** Bound proxy address (the real port when 0 was configured). */
  proxyAddress: string;
  /** Bound admin address. */
  adminAddress: string;
  logger: Logger;
  /** Stops accepting, ends the snapshot stream and closes upstream pools. */
  stop(): Promise<void>;
}

/**
 * Assembles one data plane, in the order a snapshot and then a request flow through it, and
 * binds its listeners. Rejects with a ListenError (already logged) if either cannot bind.
 */
export async function startDataPlane(config: DataPlaneConfig): Promise<RunningDataPlane> {
  const logger = pino({ level: config.logLevel, base: { nodeId: config.nodeId } });
  const registry = new Registry();
  const snapshotMetrics = new SnapshotMetrics(registry);
  const proxyMetrics = new ProxyMetrics(registry);
  const pools = new PoolRegistry();
  const applied = new AppliedSnapshot();

  const client = new SnapshotClient({
    addresses: config.cpAddresses,
    nodeId: config.nodeId,
    hostname: hostname(),
    softwareVersion: SOFTWARE_VERSION,
    lastAppliedVersion: () => applied.version(),
    logger,
    apply: (snapshot) => {
      const result = applied.apply(snapshot);
      if (!result.ok) {
        snapshotMetrics.nacked();
        return result;
      }
      snapshotMetrics.applied(result.value.version, applied.state()!.appliedAtMs);
      pools.retain(result.value.nodeAddresses());
      return { ok: true };
    },
  });
  client.onStateChange((state) => snapshotMetrics.connected(state.status === "connected"));

  const proxy = createServer(
    createProxyHandler({ current: () => applied.current(), pools, metrics: proxyMetrics, logger }),
  );
  // Above the 60 s idle timeout of common load balancers, so they close idle sockets first.
  proxy.keepAliveTimeout = config.proxyKeepAliveTimeoutMs;
  proxy.headersTimeout = config.proxyKeepAliveTimeoutMs + 1_000;
  const admin = createAdminServer({ registry, applied });

  const stop = async () => {
    const closing = [closeServer(proxy), closeServer(admin)];
    await client.stop();
    await pools.close();
    await Promise.all(closing);
  };

  try {
    const proxyAddress = await listen(proxy, "proxy", config.proxyListen);
    logger.info({ address: proxyAddress }, "proxy listening");
    const adminAddress = await listen(admin, "admin", config.adminListen);
    logger.info({ address: adminAddress }, "admin listening");
    client.start();
    return { proxyAddress, adminAddress, logger, stop };
  } catch (err) {
    if (err instanceof ListenError)
      logger.fatal({ address: err.address, code: err.code }, err.message);
    await stop();
    throw err;
  }
}

/**
 * The clawgate-data-plane process: config, start, and on SIGTERM or SIGINT a clean stop and
 * exit 0. A listener that cannot bind exits 1, so systemd restarts it rather than it living
 * on without a port. A ConfigError is thrown to the bin, which exits 2.
 */
export async function main(argv = process.argv.slice(2), env = process.env): Promise<void> {
  const config = loadConfig({ argv, env });
  let dataPlane: RunningDataPlane;
  try {
    dataPlane = await startDataPlane(config);
  } catch (err) {
    if (err instanceof ListenError) process.exit(1);
    throw err;
  }
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    // A second signal while stopping means "now".
    if (stopping) process.exit(1);
    stopping = true;
    dataPlane.logger.info({ signal }, "stopping");
    void dataPlane.stop().then(() => process.exit(0));
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}
