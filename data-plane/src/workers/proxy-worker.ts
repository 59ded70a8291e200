import cluster from "node:cluster";
import { createServer } from "node:http";
import { fromBinary, SnapshotSchema } from "@clawgate/proto";
import { HttpDrain } from "@clawgate/runtime";
import pino from "pino";
import { AggregatorRegistry, Registry } from "prom-client";
import { accessLogTarget, createAccessLogSink } from "../access-log/access-log-sink.js";
import type { DataPlaneConfig } from "../config/config-schema.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { createProxyHandler } from "../proxy/proxy-handler.js";
import { RequestHealing } from "../proxy/request-healing.js";
import { Tunnels } from "../proxy/websocket/tunnels.js";
import { createUpgradeHandler } from "../proxy/websocket/upgrade-handler.js";
import { AppliedSnapshot } from "../runtime/applied-snapshot.js";
import { listen } from "../runtime/listen.js";
import { PoolRegistry } from "../upstream/pool-registry.js";
import { type FromWorker, isToWorker, type ToWorker } from "./worker-messages.js";

/**
 * One proxy worker of a data plane with `workers` > 1: the request path only (pools, healing,
 * proxy listener shared through node:cluster). The primary holds the snapshot stream, health
 * probes, disk cache and admin listener, and sends each snapshot and health change here.
 */
export async function runProxyWorker(config: DataPlaneConfig): Promise<void> {
  const logger = pino({
    level: config.logLevel,
    base: { nodeId: config.nodeId, worker: cluster.worker?.id },
  });
  const registry = new Registry();
  // The primary's /metrics asks every worker for its registry and sums them.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
  const send = (message: FromWorker) => process.send?.(message);
  const pools = new PoolRegistry();
  const applied = new AppliedSnapshot();
  const unusable = new Set<string>();
  const healthListeners = new Set<(change: { readonly upstream: string }) => void>();
  const healing = new RequestHealing({
    registry,
    logger,
    nodeUsable: (upstream, address) => !unusable.has(nodeKey(upstream, address)),
    healthChanges: (listener) => healthListeners.add(listener),
    reportRefused: (upstream, address) => send({ type: "clawgate:refused", upstream, address }),
  });
  // Each worker appends its own lines to the same target (O_APPEND keeps lines whole).
  const accessLog = createAccessLogSink(
    accessLogTarget(config.accessLog),
    (error) => logger.warn({ err: { message: error.message } }, "access log write failed"),
    config.accessLogSample,
  );
  const metrics = new ProxyMetrics(registry);
  const proxyHandler = createProxyHandler({
    current: () => applied.current(),
    pools,
    metrics,
    logger,
    healing,
    replayBodyLimitBytes: config.replayBodyLimitBytes,
    accessLog,
  });
  const proxy = createServer(proxyHandler);
  // WebSocket handshakes are served where the requests are: in the workers.
  const tunnels = new Tunnels(registry);
  proxy.on(
    "upgrade",
    createUpgradeHandler({
      current: () => applied.current(),
      pools,
      metrics,
      healing,
      tunnels,
      logger,
    }),
  );
  proxy.keepAliveTimeout = config.proxyKeepAliveTimeoutMs;
  proxy.headersTimeout = config.proxyKeepAliveTimeoutMs + 1_000;
  const drain = new HttpDrain(proxy);

  /** Decodes and applies one snapshot; the primary ACKs only when every worker said ok. */
  async function applyBytes(base64: string): Promise<{ ok: boolean; reason?: string }> {
    try {
      const snapshot = fromBinary(SnapshotSchema, Buffer.from(base64, "base64"));
      const result = await applied.applyInTurns(snapshot, "control-plane");
      if (result === undefined) return { ok: false, reason: "superseded" };
      if (!result.ok) return { ok: false, reason: result.reason };
      const compiled = result.value;
      pools.retain({ get: (a) => compiled.poolKeysOf(a) });
      healing.sync(compiled);
      return { ok: true };
    } catch (err) {
      return { ok: false, reason: `worker apply failed: ${(err as Error).message}` };
    }
  }

  // Messages are handled one at a time, in order: a snapshot is swapped in before the next.
  let queue: Promise<unknown> = Promise.resolve();
  process.on("message", (message: unknown) => {
    if (!isToWorker(message)) return;
    queue = queue.then(() => handle(message));
  });
  // systemd signals the whole cgroup; the primary decides when a worker drains and exits.
  process.on("SIGTERM", () => {});
  process.on("SIGINT", () => {});
  // logrotate signals the whole group too: a worker reopens its access-log file, never dies.
  process.on("SIGHUP", () => accessLog?.reopen());
  // The primary is gone: nothing would deliver snapshots or stop this worker any more.
  process.on("disconnect", () => process.exit(0));
  send({ type: "clawgate:hello" });

  async function handle(message: ToWorker): Promise<void> {
    switch (message.type) {
      case "clawgate:init": {
        for (const node of message.unusable) unusable.add(nodeKey(node.upstream, node.address));
        // The current snapshot is applied before this worker takes any traffic.
        if (message.snapshot !== undefined) await applyBytes(message.snapshot);
        const address = await listen(proxy, "proxy", config.proxyListen);
        logger.info({ address, pid: process.pid }, "proxy worker listening");
        send({ type: "clawgate:listening", address });
        return;
      }
      case "clawgate:snapshot": {
        const result = await applyBytes(message.snapshot);
        send({ type: "clawgate:applied", version: message.version, ...result });
        return;
      }
      case "clawgate:health": {
        const key = nodeKey(message.upstream, message.address);
        if (message.usable) unusable.delete(key);
        else unusable.add(key);
        for (const listener of healthListeners) listener({ upstream: message.upstream });
        return;
      }
      case "clawgate:stop": {
        // A tunnel is no request: the HTTP drain would wait on its socket forever.
        tunnels.closeAll();
        const drained = await drain.drain(message.drainTimeoutMs);
        if (!drained.drained) logger.warn({ cut: drained.cut }, "drain timed out; cut requests");
        await pools.close();
        await accessLog?.close();
        process.exit(0);
      }
    }
  }
}

function nodeKey(upstream: string, address: string): string {
  return `${upstream}\u0000${address}`;
}
