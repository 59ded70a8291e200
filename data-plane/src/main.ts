import cluster from "node:cluster";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { hostname } from "node:os";
import type { Snapshot, SnapshotDelta } from "@clawgate/proto";
import {
  CLOSE_GRACE_MS,
  createNotifier,
  DrainDelay,
  HttpDrain,
  logUnhandledRejections,
  type Notifier,
  onShutdownSignals,
  settingOrigin,
  startSupervision,
  withDrainingReadiness,
} from "@clawgate/runtime";
import pino, { type Logger } from "pino";
import { Registry } from "prom-client";
import { accessLogTarget, createAccessLogSink } from "./access-log/access-log-sink.js";
import { createAdminHandler } from "./admin/admin-server.js";
import { BreakerStates } from "./breaker/breaker-states.js";
import { FleetProbes } from "./breaker/fleet-probes.js";
import type { DataPlaneConfig } from "./config/config-schema.js";
import { readCpTls } from "./config/cp-tls.js";
import { loadConfig } from "./config/load-config.js";
import { TrustedProxies } from "./config/trusted-proxies.js";
import { HealthMetrics, HealthRegistry, HealthReportPacer } from "./health/index.js";
import { familiesText, metricsSource } from "./metrics/metrics-source.js";
import { ProxyMetrics } from "./metrics/proxy-metrics.js";
import { SnapshotMetrics } from "./metrics/snapshot-metrics.js";
import { TenantMetrics } from "./metrics/tenant-metrics.js";
import { OUTCOME_REPORT_INTERVAL_MS, VersionOutcomes } from "./outcomes/version-outcomes.js";
import { ServingStatus } from "./process/serving-status.js";
import { applyListenerLimits, listenerServerOptions } from "./proxy/listener-limits.js";
import { createProxyHandler } from "./proxy/proxy-handler.js";
import { RequestHealing } from "./proxy/request-healing.js";
import { Tunnels } from "./proxy/websocket/tunnels.js";
import { createUpgradeHandler } from "./proxy/websocket/upgrade-handler.js";
import { LeaseBook } from "./quota/lease-book.js";
import { startQuotaFlush } from "./quota/quota-flush.js";
import type { AfterSwapStep } from "./runtime/after-swap.js";
import { logAmbiguousKeys } from "./runtime/ambiguous-keys-log.js";
import {
  AppliedSnapshot,
  type CompiledSnapshot,
  type CompileResult,
  type SnapshotSource,
} from "./runtime/applied-snapshot.js";
import { closeServer } from "./runtime/close-server.js";
import { followSwap } from "./runtime/follow-swap.js";
import { HealthSync } from "./runtime/health-sync.js";
import { ListenError, listen } from "./runtime/listen.js";
import { CacheMetrics, LastGoodSnapshot, SnapshotCache } from "./snapshot-cache/index.js";
import {
  type ApplyResult,
  type SnapshotApplyResult,
  SnapshotClient,
} from "./snapshot-client/snapshot-client.js";
import {
  createProxyTlsListener,
  loadProxyTlsCertificates,
} from "./tls-listener/proxy-tls-listener.js";
import { createNodeResolver } from "./upstream/node-resolver.js";
import { PoolRegistry } from "./upstream/pool-registry.js";
import { UpstreamTlsWatch } from "./upstream/upstream-tls-watch.js";
import { everyWorkerOutcome } from "./workers/every-worker-outcome.js";
import { runProxyWorker } from "./workers/proxy-worker.js";
import { WorkerCoordination } from "./workers/worker-coordination.js";
import { workerCount } from "./workers/worker-count.js";
import { exitAsFailed, WorkerStartError } from "./workers/worker-failure.js";
import { WorkerPool } from "./workers/worker-pool.js";

/**
 * Snapshots delivered within this window reach the disk cache as one write: the newest whole,
 * or the deltas since as one append (one fsync for a burst of changes).
 */
const CACHE_SAVE_DELAY_MS = 2_000;

const SOFTWARE_VERSION: string = JSON.parse(
  readFileSync(new URL("../package.json", import.meta.url), "utf8"),
).version;

export interface RunningDataPlane {
  /** Bound proxy address (the real port when 0 was configured). */
  proxyAddress: string;
  /** Bound admin address. */
  adminAddress: string;
  /** Bound HTTPS proxy address; undefined without proxyTlsListen. */
  proxyTlsAddress: string | undefined;
  logger: Logger;
  /** READY/STATUS/STOPPING to systemd (silent without NOTIFY_SOCKET). */
  notifier: Notifier;
  /**
   * Readiness goes false at once; the proxy keeps accepting and serving for `drainDelayMs`
   * (default 0), then stops accepting and lets requests in flight finish within
   * `drainTimeoutMs` (default 0: cut at once); then the snapshot stream and pools are closed.
   */
  stop(drainTimeoutMs?: number, drainDelayMs?: number): Promise<void>;
  /** Ends the drain delay of a stop in progress at once; false when none is running. */
  skipDrainDelay(): boolean;
  /** Opens the access-log file again (SIGHUP after logrotate); a no-op otherwise. */
  reopenAccessLog(): void;
}

/**
 * Assembles one data plane, in the order a snapshot and then a request flow through it, and
 * binds its listeners. Rejects with a ListenError (already logged) if either cannot bind.
 */
export async function startDataPlane(
  config: DataPlaneConfig,
  options: {
    notifier?: Notifier;
    /** Told each time a version reaches the disk cache (benchmarks wait on it). */
    onCacheSaved?: (version: number) => void;
    /** Coalescing window of cache writes; default CACHE_SAVE_DELAY_MS (a benchmark sets 0). */
    cacheSaveDelayMs?: number;
  } = {},
): Promise<RunningDataPlane> {
  // Read before anything listens: a bad certificate file is a ConfigError (exit 2).
  const cpTls = readCpTls(config);
  const logger = pino({ level: config.logLevel, base: { nodeId: config.nodeId } });
  const proxyTlsCertificates = loadProxyTlsCertificates(config, logger);
  // Opened before anything listens: a file that cannot be opened is a ConfigError (exit 2).
  const accessLog = createAccessLogSink(
    accessLogTarget(config.accessLog, settingOrigin(config, "accessLog")),
    (error) => logger.warn({ err: { message: error.message } }, "access log write failed"),
    config.accessLogSample,
  );
  const registry = new Registry();
  const snapshotMetrics = new SnapshotMetrics(registry);
  // With workers > 1 the workers serve requests and /metrics sums theirs; this process's own
  // request-path series stay out of it, or each would be listed twice.
  const workerTotal = workerCount(config);
  const requestRegistry = workerTotal > 1 ? new Registry() : registry;
  // Counts per config version, reported to the control plane for its progressive rollouts.
  const outcomes = new VersionOutcomes();
  const proxyMetrics = new ProxyMetrics(requestRegistry, (status) => outcomes.record(status));
  // Node names resolved with dnsServers when set, again every dnsRefreshMs (busy connections).
  const pools = new PoolRegistry({
    resolver: createNodeResolver(config.dnsServers),
    dnsRefreshMs: config.dnsRefreshMs,
    onDnsChange: (addresses) =>
      logger.info({ nodes: addresses }, "node name resolves to new addresses; reconnecting"),
  });
  const applied = new AppliedSnapshot();
  // Layer 2: probe-gated eviction and quarantine per node, probes on a worker thread.
  const healthMetrics = new HealthMetrics(registry);
  const health = new HealthRegistry({
    metrics: healthMetrics,
    logger,
    dnsServers: config.dnsServers,
  });
  // Layer 3: breakers, cooldowns, retry budgets, stale cache; it asks layer 2 which nodes to use.
  // breaker.fleetProbe: one data plane probes a half-open upstream for the fleet, the control
  // plane relays its verdict to the others on the snapshot stream.
  const fleetProbes = new FleetProbes({
    nodeId: config.nodeId,
    send: (claim) => client.sendProbeClaim(claim),
    now: () => performance.now(),
    verdict: (upstream, success) => healing.breakers.find(upstream)?.fleetVerdict(success),
  });
  // The breakers not closed, told to the control plane (BreakerReport) for its console and
  // `clawctl status`: on each transition, coalesced to one report a second like health's.
  const breakerStates = new BreakerStates();
  const breakerReports = new HealthReportPacer({
    // With workers they hold the breakers (they answer the requests): the report merges theirs,
    // for the upstreams the served config still has (this process has no breakers to ask).
    send: () =>
      client.sendBreakers(
        workers === undefined
          ? breakerStates.report((upstream) => healing.breakers.find(upstream) !== undefined)
          : workers.breakers.report(
              (upstream) => applied.current()?.upstreams.has(upstream) === true,
            ),
      ),
  });
  const healing: RequestHealing = new RequestHealing({
    registry: requestRegistry,
    probeGate: fleetProbes,
    logger,
    onBreakerTransition: (event) => {
      breakerStates.transition(event);
      breakerReports.request();
    },
    nodeUsable: (upstream, address) => health.isUsable(upstream, address),
    // Each change rebuilds that upstream's picker, so a pick never asks the registry.
    healthChanges: (listener) => health.onChange(listener),
    reportRefused: (upstream, address) => health.reportRefused(upstream, address),
  });
  const workers =
    workerTotal > 1
      ? new WorkerPool({
          count: workerTotal,
          logger,
          registry,
          served: () => applied.current()?.source,
          onRefused: (upstream, address) => health.reportRefused(upstream, address),
          onCoordination: (worker, message) => coordination?.message(worker, message),
          onGone: (worker) => coordination?.gone(worker),
          onBreakers: () => breakerReports.request(),
          applyTimeoutMs: config.workerApplyTimeoutMs,
          pingIntervalMs: config.workerPingIntervalMs,
          maxMissedPings: config.workerMaxMissedPings,
          helloTimeoutMs: config.workerHelloTimeoutMs,
        })
      : undefined;
  // Workers' pickers follow this process's probes: every eviction and return reaches them.
  health.onChange((change) =>
    workers?.healthChanged(
      change.upstream,
      change.address,
      health.isUsable(change.upstream, change.address),
    ),
  );
  const notifier = options.notifier ?? createNotifier({ logger });
  const status = new ServingStatus(notifier);

  // Fleet-wide tenant budgets: leases from the control plane on the snapshot stream, spent
  // locally by the rate-limit and token-budget policies (README, "Fleet-wide limits").
  const quota = new LeaseBook({
    now: () => performance.now(),
    send: (reports) => client.sendQuotaUsage(reports),
  });
  // With workers the primary keeps the one set of leases and the one probe claim per upstream
  // the control plane sees; the workers spend sub-shares and probe through it.
  const coordination =
    workers && new WorkerCoordination({ workers, book: quota, fleetProbes, nodeId: config.nodeId });
  const tenantMetrics = new TenantMetrics(requestRegistry);
  const client = new SnapshotClient({
    // Node health rides the stream: the whole view after each Hello, then paced reports.
    health,
    onQuotaGrant: (grant) => {
      quota.grant(grant);
      coordination?.granted(grant);
    },
    onProbeVerdict: (verdict) => {
      fleetProbes.onVerdict(verdict);
      coordination?.verdict(verdict);
    },
    addresses: config.cpAddresses,
    nodeId: config.nodeId,
    hostname: hostname(),
    softwareVersion: SOFTWARE_VERSION,
    lastAppliedVersion: () => applied.version(),
    logger,
    tls: cpTls,
    // A whole snapshot compiles across event-loop turns; a delta compiles only what it touches.
    apply: (snapshot, superseded) => {
      const here = async () => {
        const previous = applied.current();
        const result = await applied.applyInTurns(snapshot, "control-plane", superseded);
        return (
          result &&
          afterApply(
            result,
            previous,
            fromControlPlane(() => lastGood.delivered(snapshot)),
          )
        );
      };
      if (workers === undefined) return here();
      return inEveryWorker(workers.applySnapshot(snapshot, here));
    },
    // With workers only the delta travels to each of them, which applies it on the version it
    // serves (the same as this process's: an apply is all or nothing across them).
    applyDelta:
      workers === undefined
        ? applyDeltaHere
        : (delta) => inEveryWorker(workers.applyDelta(delta, async () => applyDeltaHere(delta))),
  });
  /**
   * The outcome of an apply made in every worker and then here (two phases: see TwoPhaseApply);
   * /readyz and the ACK follow only once every live worker serves the version. A worker's
   * refusal is NACKed with its reason and counted like this process's own; a superseded apply
   * is neither (everyWorkerOutcome).
   */
  async function inEveryWorker(apply: Promise<SnapshotApplyResult>): Promise<SnapshotApplyResult> {
    const result = await everyWorkerOutcome(apply, {
      count: () => nacks,
      nacked: () => snapshotMetrics.nacked(),
    });
    if (result?.ok === true) workersServe = true;
    return result;
  }
  function applyDeltaHere(delta: SnapshotDelta): ApplyResult {
    const previous = applied.current();
    const result = applied.applyDelta(delta);
    if (!result.ok) return afterApply(result, previous, []);
    const compiled = result.value;
    // Only the delta goes to disk; the whole snapshot is put together if the cache needs it.
    return afterApply(
      result,
      previous,
      fromControlPlane(() => lastGood.deliveredDelta(delta, () => compiled.source)),
    );
  }
  client.onStateChange((state) => {
    snapshotMetrics.connected(state.status === "connected");
    status.connection(state);
    quota.setConnected(state.status === "connected");
    if (state.status !== "connected") fleetProbes.reset();
    coordination?.streamChanged(state.status === "connected");
  });
  const stopQuotaFlush = startQuotaFlush(quota);
  // The control plane journals, counts and remediates from these reports, coalesced to one per
  // second so a burst of changes costs one report, not one per change. After each Hello the
  // whole view goes; then only what changed, where the control plane takes that (issue 9).
  const healthReports = new HealthReportPacer({
    send: (held) => client.reportHealth(held),
    keepsEveryChange: () => client.healthChangesOnly(),
  });
  health.onChange((change) => healthReports.request(change));
  // Cumulative counts, so a report lost with a stream costs nothing; once a second at most.
  // With workers they answer the requests: the report is the sum of what each counted.
  const outcomeReports = setInterval(() => {
    const report = (workers?.outcomes ?? outcomes).takeReport();
    if (report !== undefined) client.sendOutcomes(report);
  }, OUTCOME_REPORT_INTERVAL_MS);
  outcomeReports.unref();
  // Serves the snapshot on disk when no control plane answers at boot (cacheFallbackAfterMs).
  const lastGood = new LastGoodSnapshot({
    cache: new SnapshotCache(config.cacheDir),
    metrics: new CacheMetrics(registry),
    logger,
    fallbackAfterMs: config.cacheFallbackAfterMs,
    hasSnapshot: () => applied.current() !== undefined,
    apply: (snapshot) => applyCached(snapshot),
    saveDelayMs: options.cacheSaveDelayMs ?? CACHE_SAVE_DELAY_MS,
    onServedFromCache: (version) => status.applied(version, "cache"),
    onSaved: options.onCacheSaved,
  });
  /** Steps that follow a control plane's snapshot or delta, besides those every one takes. */
  function fromControlPlane(cache: () => void): AfterSwapStep[] {
    return [
      ["snapshot cache", cache],
      ["serving status", () => status.applied(applied.version(), "control-plane")],
    ];
  }

  // Each swap's changed upstreams reach the health registry in order (see HealthSync).
  const healthSync = new HealthSync(health, (err) =>
    logger.error({ err, step: "health" }, "snapshot applied, but syncing node health failed"),
  );
  /** Refusals counted by afterApply, so one made in a worker is counted once too. */
  let nacks = 0;
  // With workers they answer the requests: /readyz says ready once they serve a snapshot, not
  // when this process swaps it in (just before they commit it, or without them if they refuse).
  let workersServe = workers === undefined;
  const served = { state: () => (workersServe ? applied.state() : undefined) };
  // Upstream CA and client certificate files are read when a snapshot compiles; a change on
  // disk compiles the served snapshot again, so the upstream's pools are rebuilt with the new
  // files (requests in flight finish on the old ones), or the change is refused and logged.
  const upstreamTlsWatch = new UpstreamTlsWatch({ onChange: (u) => void rereadUpstreamTls(u) });
  async function rereadUpstreamTls(upstreams: readonly string[]): Promise<void> {
    if (applied.current() === undefined || stopping) return;
    if (workers === undefined) {
      await reloadUpstreamTls(upstreams);
      return;
    }
    // In the two-phase queue like any apply, on the snapshot served when its turn comes: one
    // read now would roll the workers back if a newer version committed meanwhile. Workers
    // compile it again, so their pools read the new files too.
    void workers
      .applySnapshot(
        () => (stopping ? undefined : applied.current()?.source),
        () => reloadUpstreamTls(upstreams),
      )
      .then((inWorkers) => {
        if (inWorkers?.ok === false) {
          logger.warn(
            { upstreams, reason: inWorkers.reason },
            "upstream TLS file change refused; the previous files keep serving",
          );
        }
      });
  }
  /**
   * Compiles the served snapshot again, here; undefined when none is served any more, or when
   * a snapshot swapped in meanwhile superseded it (its swap checks whether it read the files
   * before this change: UpstreamTlsWatch.sync). Across turns, as any whole snapshot:
   * recompiling 10,000 routes is seconds.
   */
  async function reloadUpstreamTls(upstreams: readonly string[]): Promise<ApplyResult | undefined> {
    const state = applied.state();
    if (state === undefined || stopping) return undefined;
    const previous = state.compiled;
    const result = await applied.applyInTurns(
      previous.source,
      state.source,
      () => stopping || applied.current() !== previous,
    );
    if (result === undefined) return undefined;
    if (!result.ok) {
      // Not a NACK: the control plane's snapshot was fine; the files on this machine are not.
      if (workers === undefined) {
        logger.warn(
          { upstreams, reason: result.reason },
          "upstream TLS file change refused; the previous files keep serving",
        );
      }
      return { ok: false, reason: result.reason };
    }
    afterApply(result, previous, []);
    logger.info({ upstreams }, "upstream TLS files reloaded; new connections use them");
    return { ok: true };
  }

  /**
   * The disk cache's snapshot at boot, when no control plane answered in time. With workers in
   * two phases like a control plane's: it counts as served (the caller marks the data plane
   * ready) only once every worker committed it; refused by any, nothing serves it. Skipped
   * (undefined) when a control plane's snapshot got in first.
   */
  function applyCached(snapshot: Snapshot): ApplyResult | Promise<ApplyResult | undefined> {
    if (workers === undefined) return applySnapshot(snapshot, "cache");
    const unserved = () => applied.current() === undefined;
    return workers
      .applySnapshot(
        () => (unserved() ? snapshot : undefined),
        async () => (unserved() ? applySnapshot(snapshot, "cache") : undefined),
      )
      .then((result) => {
        if (result?.ok === true) workersServe = true;
        return result;
      });
  }

  /** Validates, compiles and swaps in a whole snapshot at once, here. */
  function applySnapshot(snapshot: Snapshot, source: SnapshotSource): ApplyResult {
    const previous = applied.current();
    return afterApply(applied.apply(snapshot, source), previous, []);
  }

  /**
   * Only a refusal before the swap is a NACK, and then the previous version is still the one
   * served. Everything after the swap follows the version now served and is logged, never
   * NACKed, if it fails; and it does work in proportion to what the swap changed (diffSnapshots),
   * so a one-route delta does not walk 20,000 nodes.
   */
  function afterApply(
    result: CompileResult,
    previous: CompiledSnapshot | undefined,
    more: readonly AfterSwapStep[],
  ): ApplyResult {
    if (!result.ok) {
      nacks++;
      snapshotMetrics.nacked();
      return result;
    }
    const compiled = result.value;
    // The request path first (pools, breakers, pickers), as in every worker; then this
    // process's own: node health follows the upstreams the swap changed, and the rest.
    followSwap(
      previous,
      compiled,
      {
        pools,
        healing,
        outcomes,
        metrics: [proxyMetrics, tenantMetrics, healing.retryMetrics],
      },
      logger,
      (diff) => [
        ["metrics", () => snapshotMetrics.applied(compiled.version, applied.state()!.appliedAtMs)],
        // A first snapshot's 20,000 targets are made over the turns after this one.
        ["health", () => healthSync.follow(diff.upstreams)],
        ["upstream TLS files", () => upstreamTlsWatch.sync(previous, compiled)],
        ["tenant keys", () => logAmbiguousKeys(previous, compiled, logger)],
        // Nodes added or removed change the view without any state change to report it. Once
        // the registry has synced them (a first snapshot's 20,000 nodes take several turns),
        // in a turn of its own: that report need not delay the ACK or clients behind the swap.
        [
          "health report",
          () =>
            diff.upstreams.size > 0 &&
            healthSync.synced().then(() => setImmediate(() => healthReports.request())),
        ],
        ...more,
      ],
    );
    return { ok: true };
  }

  // Parsed once here; a request pays one check, and none while the list is empty.
  const trustedProxies = TrustedProxies.of(config.trustedProxies);
  const proxyHandler = createProxyHandler({
    current: () => applied.current(),
    pools,
    metrics: proxyMetrics,
    logger,
    healing,
    replayBodyLimitBytes: config.replayBodyLimitBytes,
    trustedProxies,
    accessLog,
    quota,
    tenantMetrics,
  });
  const proxy = createServer(listenerServerOptions(config), proxyHandler);
  // WebSocket handshakes: routed like requests, then tunnelled; closed after the drain delay.
  // With workers they hold the tunnels, and their gauge is the one /metrics lists.
  const tunnels = new Tunnels(requestRegistry);
  const upgradeHandler = createUpgradeHandler({
    current: () => applied.current(),
    pools,
    metrics: proxyMetrics,
    healing,
    tunnels,
    logger,
    trustedProxies,
    // The pipeline's services: a handshake spends the tenant's fleet-wide budget too.
    services: { clock: healing.clock, quota, tenantMetrics },
  });
  proxy.on("upgrade", upgradeHandler);
  // With workers they serve HTTPS too; this process only checked the certificates at boot.
  const proxyTls =
    proxyTlsCertificates === undefined || workers !== undefined
      ? undefined
      : createProxyTlsListener(proxyTlsCertificates, proxyHandler, config);
  proxyTls?.server.on("upgrade", upgradeHandler);
  const drain = new HttpDrain(proxy);
  const drainDelay = new DrainDelay();
  // Set on stop, before the drain delay: /readyz answers 503 while the proxy still serves.
  let stopping = false;
  // Keep-alive above the 60 s idle timeout of common load balancers, so they close idle
  // sockets first; headers and whole requests within their own timeouts; a connection cap.
  applyListenerLimits(proxy, config);
  const admin = createServer(
    withDrainingReadiness(
      createAdminHandler({
        // The per-node series are kept as ready text beside the registry (NodeSeries).
        registry: workers
          ? metricsSource(
              registry,
              healthMetrics.nodeSeries,
              familiesText(() => workers.metricsView()),
            )
          : metricsSource(registry, healthMetrics.nodeSeries),
        applied: served,
      }),
      () => stopping,
    ),
  );

  const stop = async (drainTimeoutMs = 0, drainDelayMs = 0) => {
    stopping = true;
    status.stopping();
    if (drainDelayMs > 0) {
      logger.info({ drainDelayMs }, "not ready; serving on until load balancers stop sending");
      await drainDelay.wait(drainDelayMs);
    }
    // A tunnel is no request: the HTTP drain would wait on its socket forever.
    if (tunnels.size > 0) logger.info({ tunnels: tunnels.size }, "closing websocket tunnels");
    tunnels.closeAll();
    const [drained] = await Promise.all([
      workers
        ? workers.stop(drainTimeoutMs).then(() => ({ drained: true, cut: 0 }))
        : drain.drain(drainTimeoutMs),
      proxyTls?.drain.drain(drainTimeoutMs).then((tlsDrained) => {
        if (!tlsDrained.drained) {
          logger.warn({ drainTimeoutMs, cut: tlsDrained.cut }, "TLS drain timed out; cut requests");
        }
      }),
    ]);
    proxyTls?.certificates.close();
    upstreamTlsWatch.close();
    if (!drained.drained) {
      logger.warn({ drainTimeoutMs, cut: drained.cut }, "drain timed out; cut requests in flight");
    }
    await closeServer(admin);
    healthReports.close();
    breakerReports.close();
    clearInterval(outcomeReports);
    stopQuotaFlush();
    await client.stop();
    await lastGood.stop();
    await health.close();
    await pools.close();
    await accessLog?.close();
  };

  try {
    const inWorkers = await workers?.start();
    const proxyAddress = inWorkers?.proxy ?? (await listen(proxy, "proxy", config.proxyListen));
    logger.info({ address: proxyAddress, workers: workerTotal }, "proxy listening");
    let proxyTlsAddress = inWorkers?.tls;
    if (proxyTlsAddress !== undefined) {
      logger.info(
        { address: proxyTlsAddress, sniNames: proxyTlsCertificates?.names() },
        "proxy TLS listening",
      );
    }
    if (proxyTls !== undefined) {
      proxyTlsAddress = await listen(proxyTls.server, "proxy TLS", config.proxyTlsListen!);
      logger.info(
        { address: proxyTlsAddress, sniNames: proxyTls.certificates.names() },
        "proxy TLS listening",
      );
    }
    const adminAddress = await listen(admin, "admin", config.adminListen);
    logger.info({ address: adminAddress }, "admin listening");
    status.listening();
    client.start();
    lastGood.start();
    const skipDrainDelay = () => drainDelay.skip();
    return {
      proxyAddress,
      adminAddress,
      proxyTlsAddress,
      logger,
      notifier,
      stop,
      skipDrainDelay,
      reopenAccessLog: () => accessLog?.reopen(),
    };
  } catch (err) {
    if (err instanceof ListenError)
      logger.fatal({ address: err.address, code: err.code }, err.message);
    if (err instanceof WorkerStartError) logger.fatal(err.message);
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
  // A proxy worker forked by the primary (workers > 1) runs the request path only. One that
  // cannot (its config or certificates unreadable now) tells the primary why and exits.
  if (cluster.isWorker && env.CLAWGATE_WORKER === "1") {
    return (async () => runProxyWorker(loadConfig({ argv, env })))().catch(exitAsFailed);
  }
  const config = loadConfig({ argv, env });
  let dataPlane: RunningDataPlane;
  try {
    dataPlane = await startDataPlane(config);
  } catch (err) {
    // Workers that could not start serving: as a listener that cannot bind, restart and retry.
    if (err instanceof ListenError || err instanceof WorkerStartError) process.exit(1);
    throw err;
  }
  const { logger, notifier } = dataPlane;
  // A stray rejection while serving is logged, not fatal: see logUnhandledRejections.
  logUnhandledRejections(logger);
  startSupervision({
    env,
    logger,
    notifier,
    maxEventLoopDelayMs: config.watchdogMaxEventLoopDelayMs,
    maxHeapRatio: config.watchdogMaxHeapRatio,
  });
  // SIGTERM: not ready, serve on for drainDelayMs, drain (drainTimeoutMs), exit 0. A second
  // signal skips the delay, or exits at once once draining; so does the deadline.
  // logrotate moves the file away and sends SIGHUP: lines go to a fresh file from then on.
  process.on("SIGHUP", () => {
    dataPlane.reopenAccessLog();
    logger.info("access log reopened");
  });
  onShutdownSignals({
    logger,
    notifier,
    deadlineMs: config.drainDelayMs + config.drainTimeoutMs + CLOSE_GRACE_MS,
    stop: () => dataPlane.stop(config.drainTimeoutMs, config.drainDelayMs),
    hurry: () => dataPlane.skipDrainDelay(),
  });
}
