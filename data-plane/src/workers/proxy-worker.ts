import cluster from "node:cluster";
import { createServer } from "node:http";
import { create, fromBinary, ProbeVerdictSchema, QuotaGrantSchema } from "@clawgate/proto";
import { HttpDrain, installTestHooks, settingOrigin } from "@clawgate/runtime";
import pino from "pino";
import { Registry } from "prom-client";
import { accessLogTarget, createAccessLogSink } from "../access-log/access-log-sink.js";
import { BreakerStates } from "../breaker/breaker-states.js";
import { FleetProbes } from "../breaker/fleet-probes.js";
import { workerProberId } from "../breaker/probe-relay.js";
import { toWorkerBreakers } from "../breaker/worker-breakers.js";
import type { DataPlaneConfig } from "../config/config-schema.js";
import { TrustedProxies } from "../config/trusted-proxies.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { TenantMetrics } from "../metrics/tenant-metrics.js";
import { OUTCOME_REPORT_INTERVAL_MS, VersionOutcomes } from "../outcomes/version-outcomes.js";
import { applyListenerLimits, listenerServerOptions } from "../proxy/listener-limits.js";
import { createProxyHandler } from "../proxy/proxy-handler.js";
import { RequestHealing } from "../proxy/request-healing.js";
import { Tunnels } from "../proxy/websocket/tunnels.js";
import { createUpgradeHandler } from "../proxy/websocket/upgrade-handler.js";
import { LeaseBook } from "../quota/lease-book.js";
import { startQuotaFlush } from "../quota/quota-flush.js";
import type { CompiledSnapshot } from "../runtime/applied-snapshot.js";
import { followSwap } from "../runtime/follow-swap.js";
import { listen } from "../runtime/listen.js";
import {
  createProxyTlsListener,
  loadProxyTlsCertificates,
} from "../tls-listener/proxy-tls-listener.js";
import { createNodeResolver } from "../upstream/node-resolver.js";
import { PoolRegistry } from "../upstream/pool-registry.js";
import { exitAsFailed } from "./worker-failure.js";
import { workerInbox } from "./worker-inbox.js";
import { type FromWorker, isToWorker, type ToWorker } from "./worker-messages.js";
import { registryReply } from "./worker-registry-reply.js";
import { WorkerSnapshots } from "./worker-snapshots.js";

/**
 * One proxy worker of a data plane with `workers` > 1: the request path only (pools, healing,
 * the proxy listeners, plaintext and HTTPS, shared through node:cluster). The primary holds the
 * snapshot stream, health probes, disk cache and admin listener; it applies each snapshot or
 * delta here in two phases (prepare, then commit or abort) and sends each health change.
 */
export async function runProxyWorker(config: DataPlaneConfig): Promise<void> {
  const logger = pino({
    level: config.logLevel,
    base: { nodeId: config.nodeId, worker: cluster.worker?.id },
  });
  // Test-only, off unless its variable is set: lets an end-to-end test stall this event loop.
  installTestHooks(process.env, logger);
  // The primary's /metrics asks every worker for this registry and sums them.
  const registry = new Registry();
  const send = (message: FromWorker) => process.send?.(message);
  /** Sends to the primary; false when the channel is gone (nothing was sent). */
  const sendNow = (message: FromWorker) => {
    if (!process.connected) return false;
    process.send?.(message);
    return true;
  };
  // The same name resolution as a single process: dnsServers, and again every dnsRefreshMs.
  const pools = new PoolRegistry({
    resolver: createNodeResolver(config.dnsServers),
    dnsRefreshMs: config.dnsRefreshMs,
    onDnsChange: (addresses) =>
      logger.info({ nodes: addresses }, "node name resolves to new addresses; reconnecting"),
  });
  const snapshots = new WorkerSnapshots();
  const unusable = new Set<string>();
  const healthListeners = new Set<(change: { readonly upstream: string }) => void>();
  // Fleet-wide tenant budgets: this worker spends sub-shares of the primary's leases, asks the
  // primary for more, and reports what it consumed (SubShares is the primary's end).
  const quota: LeaseBook = new LeaseBook({
    now: () => performance.now(),
    send: (reports) =>
      sendNow({
        type: "clawgate:quota-usage",
        reports: reports.map((report) => ({
          tenant: report.tenant,
          kind: report.kind,
          window: String(report.window),
          consumed: String(report.consumed),
          wantsMore: report.wantsMore,
          limit: quota.limitOf(report.tenant, report.kind),
        })),
      }),
  });
  // The primary answers at once (it is the control plane of this book), stream or not.
  quota.setConnected(true);
  const stopQuotaFlush = startQuotaFlush(quota);
  const tenantMetrics = new TenantMetrics(registry);
  // breaker.fleetProbe: one worker probes for the data plane (ProbeRelay is the primary's end).
  const workerId = cluster.worker?.id ?? 0;
  const fleetProbes = new FleetProbes({
    nodeId: workerProberId(workerId),
    send: (claim) => sendNow({ type: "clawgate:probe-claim", ...claim }),
    now: () => performance.now(),
    verdict: (upstream, success) => healing.breakers.find(upstream)?.fleetVerdict(success),
  });
  const breakerStates = new BreakerStates();
  const healing: RequestHealing = new RequestHealing({
    registry,
    probeGate: fleetProbes,
    logger,
    nodeUsable: (upstream, address) => !unusable.has(nodeKey(upstream, address)),
    healthChanges: (listener) => healthListeners.add(listener),
    reportRefused: (upstream, address) => send({ type: "clawgate:refused", upstream, address }),
    // The primary merges every worker's breakers into the data plane's one BreakerReport.
    onBreakerTransition: (event) => {
      breakerStates.transition(event);
      const report = breakerStates.report(
        (upstream) => healing.breakers.find(upstream) !== undefined,
      );
      send({ type: "clawgate:breakers", breakers: toWorkerBreakers(report) });
    },
  });
  // Each worker appends its own lines to the same target (O_APPEND keeps lines whole).
  const accessLog = createAccessLogSink(
    accessLogTarget(config.accessLog, settingOrigin(config, "accessLog")),
    (error) => logger.warn({ err: { message: error.message } }, "access log write failed"),
    config.accessLogSample,
  );
  // Counts per config version for progressive rollouts: the primary sums every worker's and
  // sends them on its snapshot stream.
  const outcomes = new VersionOutcomes();
  const sendOutcomes = () => {
    const versions = outcomes.takeCounts();
    if (versions !== undefined) send({ type: "clawgate:outcomes", versions });
  };
  setInterval(sendOutcomes, OUTCOME_REPORT_INTERVAL_MS).unref();
  const metrics = new ProxyMetrics(registry, (status) => outcomes.record(status));
  // Parsed once here; a request pays one check, and none while the list is empty.
  const trustedProxies = TrustedProxies.of(config.trustedProxies);
  const proxyHandler = createProxyHandler({
    current: () => snapshots.current(),
    pools,
    metrics,
    logger,
    healing,
    replayBodyLimitBytes: config.replayBodyLimitBytes,
    trustedProxies,
    accessLog,
    quota,
    tenantMetrics,
  });
  const proxy = createServer(listenerServerOptions(config), proxyHandler);
  // WebSocket handshakes are served where the requests are: in the workers.
  const tunnels = new Tunnels(registry);
  const upgradeHandler = createUpgradeHandler({
    current: () => snapshots.current(),
    pools,
    metrics,
    healing,
    tunnels,
    logger,
    trustedProxies,
    // A handshake spends the tenant's fleet-wide budget too.
    services: { clock: healing.clock, quota, tenantMetrics },
  });
  proxy.on("upgrade", upgradeHandler);
  applyListenerLimits(proxy, config);
  const drain = new HttpDrain(proxy);
  // Each worker reads and watches the certificate files itself (the primary checked them at
  // boot): a renewal reaches every worker's listener without passing keys between processes.
  const certificates = loadProxyTlsCertificates(config, logger);
  const proxyTls = certificates && createProxyTlsListener(certificates, proxyHandler, config);
  proxyTls?.server.on("upgrade", upgradeHandler);

  /** The snapshot the request path was last brought in line with (afterSwap). */
  let followed: CompiledSnapshot | undefined;
  /**
   * What follows a swap, as in the primary (followSwap): pools no route uses close, breakers
   * and retry budgets follow; a delta's commit touches only what the delta changed. A step
   * that throws is logged there, and the snapshot is served all the same.
   */
  function afterSwap(compiled: CompiledSnapshot): void {
    const previous = followed;
    followed = compiled;
    followSwap(
      previous,
      compiled,
      {
        pools,
        healing,
        outcomes,
        metrics: [metrics, tenantMetrics, healing.retryMetrics],
      },
      logger,
    );
  }

  // Messages are handled one at a time, in order: a snapshot is swapped in before the next.
  const receive = workerInbox({
    send,
    coordinate,
    metrics: () => registryReply(registry),
    handle,
    failStart: exitAsFailed,
    logger,
  });
  process.on("message", (message: unknown) => {
    if (isToWorker(message)) receive(message);
  });
  // systemd signals the whole cgroup; the primary decides when a worker drains and exits.
  process.on("SIGTERM", () => {});
  process.on("SIGINT", () => {});
  // logrotate signals the whole group too: a worker reopens its access-log file, never dies.
  process.on("SIGHUP", () => accessLog?.reopen());
  // The primary is gone: nothing would deliver snapshots or stop this worker any more.
  process.on("disconnect", () => process.exit(0));
  send({ type: "clawgate:hello" });

  /** Applies a lease, probe verdict or stream reset from the primary; false for other messages. */
  function coordinate(message: ToWorker): boolean {
    switch (message.type) {
      case "clawgate:quota-grant":
        quota.grant(fromBinary(QuotaGrantSchema, Buffer.from(message.grant, "base64")));
        return true;
      case "clawgate:probe-verdict":
        fleetProbes.onVerdict(
          create(ProbeVerdictSchema, {
            upstream: message.upstream,
            prober: message.prober,
            outcome: message.outcome,
            leaseMs: BigInt(message.leaseMs),
          }),
        );
        return true;
      case "clawgate:stream-reset":
        // The primary's leases of the old stream lapsed, so did the sub-shares of them.
        quota.setConnected(false);
        quota.setConnected(true);
        if (!message.connected) fleetProbes.reset();
        return true;
      default:
        return false;
    }
  }

  async function handle(message: ToWorker): Promise<void> {
    switch (message.type) {
      case "clawgate:init": {
        for (const node of message.unusable) unusable.add(nodeKey(node.upstream, node.address));
        // The current snapshot is applied before this worker takes any traffic.
        if (message.snapshot !== undefined) {
          const result = await snapshots.init(message.snapshot);
          // Listening with nothing to serve would answer every request "no snapshot" while
          // counted as a worker: fail, so the primary forks another with backoff.
          if (!result.ok) throw new Error(`initial snapshot refused: ${result.reason}`);
          const compiled = snapshots.current();
          if (compiled !== undefined) afterSwap(compiled);
        }
        const address = await listen(proxy, "proxy", config.proxyListen);
        const tlsAddress =
          proxyTls && (await listen(proxyTls.server, "proxy TLS", config.proxyTlsListen!));
        logger.info({ address, tlsAddress, pid: process.pid }, "proxy worker listening");
        send({ type: "clawgate:listening", address, tlsAddress });
        return;
      }
      case "clawgate:prepare": {
        const vote = await snapshots.prepare(message.id, message.update);
        send({ type: "clawgate:prepared", id: message.id, ...vote });
        return;
      }
      case "clawgate:commit": {
        const compiled = snapshots.commit(message.id);
        if (compiled !== undefined) afterSwap(compiled);
        send({ type: "clawgate:committed", id: message.id });
        return;
      }
      case "clawgate:abort":
        snapshots.abort(message.id);
        return;
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
        const [drained, tlsDrained] = await Promise.all([
          drain.drain(message.drainTimeoutMs),
          proxyTls?.drain.drain(message.drainTimeoutMs),
        ]);
        proxyTls?.certificates.close();
        const cut = drained.cut + (tlsDrained?.cut ?? 0);
        if (cut > 0) logger.warn({ cut }, "drain timed out; cut requests");
        stopQuotaFlush();
        // What was consumed since the last report still counts against the tenants' budgets.
        quota.flush();
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
