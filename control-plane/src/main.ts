import { hostname } from "node:os";
import {
  CLOSE_GRACE_MS,
  createNotifier,
  onShutdownSignals,
  settlesWithin,
  startSupervision,
} from "@clawgate/runtime";
import { pino } from "pino";
import { Registry } from "prom-client";
import { buildAdminApp } from "./admin/app.js";
import { startUnreadyServer, type UnreadyServer } from "./admin/unready-server.js";
import { TokenStore } from "./auth/token-store.js";
import { readAdminTls } from "./config/admin-tls.js";
import { resolveAdminToken } from "./config/admin-token.js";
import { readGrpcServerTls } from "./config/grpc-tls.js";
import { loadControlPlaneSettings } from "./config/load-settings.js";
import { LiveFeed } from "./console/live-feed.js";
import { createEtcdElection } from "./election/etcd-election.js";
import { alwaysLeader } from "./election/leader-election.js";
import { Fleet } from "./fleet/fleet.js";
import { startSnapshotServer } from "./grpc/snapshot-server.js";
import { FleetHealth } from "./health/fleet-health.js";
import { SharedHealthReports } from "./health/shared-health-reports.js";
import { ConfigHistory } from "./history/config-history.js";
import { ConfigAudit } from "./journal/config-audit.js";
import { Journal } from "./journal/journal.js";
import { JournalFollower } from "./journal/journal-follower.js";
import { exitOnListenFailure, isLoopback, splitHostPort } from "./listen.js";
import { registerControlPlaneMetrics } from "./metrics/control-plane-metrics.js";
import { registerQuotaMetrics } from "./metrics/quota-metrics.js";
import { StoredProbeCoordinator } from "./probe/stored-probe-coordinator.js";
import { StoredWindowCounter } from "./quota/stored-window-counter.js";
import { RegistryExpiryWatcher } from "./registry/expiry-watcher.js";
import { NodeRegistry } from "./registry/node-registry.js";
import { configPolicySource } from "./remediation/config-policy-source.js";
import { RemediationRunner } from "./remediation/remediation-runner.js";
import { storeEpisodeRecords } from "./remediation/stored-episodes.js";
import { DataPlaneRecords } from "./replicas/data-plane-records.js";
import { FleetBreakers } from "./replicas/fleet-breakers.js";
import { FleetView, shareFleet } from "./replicas/fleet-view.js";
import { startApplySweeper } from "./resources/apply-sweeper.js";
import { ConfigService } from "./resources/config-service.js";
import { OutcomeBoard } from "./rollout/outcome-board.js";
import { RolloutController } from "./rollout/rollout-controller.js";
import { ConfigModel } from "./snapshot/config-model.js";
import { SnapshotBuilder } from "./snapshot/snapshot-builder.js";
import { openStore } from "./store/open-store.js";

/**
 * Assembles the control plane, in the order data flows: store -> config service (admin writes)
 * and snapshot builder (store -> snapshots) -> gRPC server (snapshots -> data planes) and fleet
 * (data planes' answers) -> admin API and metrics.
 */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  const settings = loadControlPlaneSettings(argv, env);
  // Read before anything starts: a bad certificate file exits 2 like any other bad setting.
  const grpcTls = readGrpcServerTls(settings);
  const adminTls = readAdminTls(settings);
  const logger = pino({ name: "clawgate-control-plane", level: settings.logLevel });
  if (!isLoopback(settings.grpcListen) && grpcTls?.clientCa === undefined) {
    // Whoever reaches the stream gets the whole config and can report node health, which
    // feeds remediation: beyond loopback, only data planes with a certificate should.
    logger.warn(
      { address: settings.grpcListen },
      "the snapshot service listens beyond loopback without mutual TLS; set grpcTlsClientCaFile",
    );
  }
  // systemd Type=notify: READY=1 once both listeners are bound, WATCHDOG=1 while healthy.
  const notifier = createNotifier({ logger });
  notifier.status("opening the store");

  // Until etcd answers, the admin port says why it is not ready (/readyz 503, /healthz 200).
  let unready: UnreadyServer | undefined;
  const store = await openStore({
    etcdEndpoints: settings.etcdEndpoints,
    embeddedPath: settings.storePath,
    probeKey: settings.etcdPrefix,
    logger,
    onUnreachable: async (reason) => {
      notifier.status(`waiting for the store: ${reason}`);
      unready?.setReason(reason);
      unready ??= await startUnreadyServer(settings.adminListen, reason).catch(
        exitOnListenFailure(logger, "admin API", settings.adminListen),
      );
    },
  });
  unready?.setReason("etcd answered; reading the store");
  logger.info({ store: store.kind, prefix: settings.etcdPrefix }, "store opened");

  // One model of the config in memory, fed by a watch, for both the admin API's write checks
  // and the snapshot builder: neither reads the whole config again per change.
  const model = new ConfigModel({ store, prefix: settings.etcdPrefix, logger });
  const config = new ConfigService(store, settings.etcdPrefix, {
    model,
    // Only one live control plane can listen on this host's admin address: a big apply left
    // by an owner at the same place with another boot is this one's dead predecessor's.
    applyOwnerSlot: `${hostname()}/${settings.adminListen}`,
    applyLeaseTtlSeconds: settings.applyLeaseTtlSeconds,
  });
  const builder = new SnapshotBuilder({
    store,
    prefix: settings.etcdPrefix,
    logger,
    instanceId: settings.instanceId,
    model,
  });
  await builder.start();
  // Big applies are staged behind a gate (resources/staged-apply.ts); only etcd needs them.
  const sweeper = store.kind === "etcd" ? startApplySweeper(config, logger) : undefined;

  const fleet = new Fleet({ graceMs: settings.staleGraceMs });
  const metrics = new Registry();
  const controlPlaneMetrics = registerControlPlaneMetrics(metrics, { builder, fleet });

  // Heal journal, and the registry whose lapsed leases it records.
  const journal = new Journal({ store, prefix: settings.etcdPrefix, metrics });
  const registry = new NodeRegistry({ store, prefix: settings.etcdPrefix });
  const expiries = new RegistryExpiryWatcher({
    store,
    prefix: settings.etcdPrefix,
    journal,
    source: `control-plane/${settings.instanceId}`,
    logger,
  });
  await expiries.start();
  // The console's heal events from every replica, not only those this one writes; with the
  // embedded store this process is the only writer, so its own records are all there is.
  const journalFeed =
    store.kind === "etcd"
      ? new JournalFollower({ store, prefix: settings.etcdPrefix, logger })
      : undefined;
  await journalFeed?.start();

  // Layer 2 across the fleet: the data planes' node-health reports (via the snapshot streams
  // into the fleet), majority verdicts, and remediation of nodes most of them evicted, run by
  // one replica at a time (the embedded store means a single process, always the leader).
  // With etcd, replicas share the reports under meta/health/ so each of them, the remediation
  // leader included, counts the whole fleet; the embedded store means one replica, and writing
  // every report to its file would only cost fsyncs.
  const fleetHealth = new FleetHealth({
    fleet,
    journal,
    logger,
    shared:
      store.kind === "etcd"
        ? new SharedHealthReports({
            store,
            prefix: settings.etcdPrefix,
            replicaId: settings.instanceId,
            // A dead replica's reports outlive it as long as its claim to leadership does.
            leaseTtlSeconds: settings.leaderTtlSeconds,
            logger,
          })
        : undefined,
  });
  await fleetHealth.start();
  const election =
    store.kind === "etcd"
      ? createEtcdElection({
          endpoints: settings.etcdEndpoints,
          // Under meta/: election keys are the control plane's bookkeeping, not config.
          prefix: `${settings.etcdPrefix}meta/`,
          instanceId: settings.instanceId,
          ttlSeconds: settings.leaderTtlSeconds,
          logger,
        })
      : alwaysLeader();
  // What remediation may run is the host owner's call (these settings), not a config writer's.
  const remediationAllowlist = {
    commands: settings.remediationCommands,
    webhookOrigins: settings.remediationWebhookOrigins,
  };
  const remediation = new RemediationRunner({
    health: fleetHealth,
    policies: configPolicySource(config),
    journal,
    election,
    source: `control-plane/${settings.instanceId}`,
    logger,
    // Each evicted node's episode in its own key: a burst that floods the journal must not
    // make the next leader start every episode over.
    episodes: storeEpisodeRecords(store, settings.etcdPrefix),
    allow: remediationAllowlist,
    allowRoot: settings.remediationAllowRoot,
    maxConcurrent: settings.remediationMaxConcurrent,
  });
  remediation.start();
  await election.start();

  // Progressive rollouts: the config history restores the base version when canaries fail.
  const audit = new ConfigAudit({ store, prefix: settings.etcdPrefix, logger });
  await audit.start();
  const history = new ConfigHistory({
    store,
    prefix: settings.etcdPrefix,
    limit: settings.historyLimit,
    maxBytes: settings.historyMaxBytes,
    logger,
  });
  await history.start();
  // What each data plane reports beyond node health (request outcomes, breakers), shared with
  // the other replicas like health reports are, so the rollout leader judges the whole fleet.
  const records = new DataPlaneRecords({
    store: store.kind === "etcd" ? store : undefined,
    prefix: settings.etcdPrefix,
    replicaId: settings.instanceId,
    leaseTtlSeconds: settings.leaderTtlSeconds,
    logger,
  });
  await records.start();
  shareFleet(fleet, records);
  // GET /v1/dataplanes, clawctl status and the console list every replica's data planes.
  const fleetView = new FleetView({
    fleet,
    records,
    replicaId: settings.instanceId,
    graceMs: settings.staleGraceMs,
  });
  const outcomes = new OutcomeBoard(records);
  const breakers = new FleetBreakers(records);
  const rollouts = new RolloutController({
    store,
    prefix: settings.etcdPrefix,
    config,
    history,
    audit,
    builder,
    // Canaries among every replica's SYNCED data planes.
    fleet: fleetView,
    board: outcomes,
    model,
    election,
    // Evidence no older than a leader takeover takes (see evidenceWriteMs).
    evidenceWriteMs: settings.leaderTtlSeconds * 1000,
    logger,
  });
  await rollouts.start();

  // Tenant budgets: with etcd, replicas reserve blocks of each tenant window from a count
  // under meta/quota/, so two replicas never both hand out the whole budget; the embedded
  // store means one replica, which counts alone.
  const quotaCounter =
    store.kind === "etcd"
      ? new StoredWindowCounter({ store, prefix: settings.etcdPrefix, logger })
      : undefined;
  await quotaCounter?.start();
  // Half-open probes likewise: with etcd a claim is a key under meta/probes/, so the fleet has
  // one prober per upstream whichever replica each data plane streams from.
  const probes =
    store.kind === "etcd"
      ? new StoredProbeCoordinator({
          store,
          prefix: settings.etcdPrefix,
          replicaId: settings.instanceId,
          logger,
        })
      : undefined;
  await probes?.start();
  const grpc = await startSnapshotServer({
    address: settings.grpcListen,
    builder,
    fleet,
    targets: rollouts,
    outcomes: (nodeId, versions) => records.outcomes(nodeId, versions),
    breakers: (nodeId, breakers) => records.breakers(nodeId, breakers),
    logger,
    metrics: controlPlaneMetrics,
    tls: grpcTls,
    maxStreams: settings.grpcMaxStreams,
    quotaWindows: { minuteMs: settings.quotaMinuteMs, dayMs: settings.quotaDayMs },
    quotaCounter,
    probes,
    quotaMetrics: registerQuotaMetrics(metrics),
  }).catch(exitOnListenFailure(logger, "gRPC snapshot service", settings.grpcListen));

  // Named tokens with roles, kept in memory from a watch; the bootstrap token is their admin.
  const tokens = new TokenStore({
    store,
    prefix: settings.etcdPrefix,
    bootstrapToken: await resolveAdminToken(settings, logger),
    logger,
  });
  await tokens.start();

  let draining = false;
  const admin = await buildAdminApp({
    draining: () => draining,
    config,
    snapshot: builder,
    fleet: fleetView,
    tokens,
    audit,
    history,
    rollouts,
    tls: adminTls,
    metrics,
    logger,
    registry,
    journal,
    health: fleetHealth,
    remediation,
    remediationAllowlist,
    breakers,
    // The console's live updates, from the same fleet, health view, journal and breakers.
    live: new LiveFeed({
      snapshot: builder,
      fleet: fleetView,
      health: fleetHealth,
      journal: journalFeed ?? journal,
      breakers,
    }),
  });
  const [host, port] = splitHostPort(settings.adminListen);
  await unready?.close();
  await admin
    .listen({ host, port })
    .catch(exitOnListenFailure(logger, "admin API", settings.adminListen));
  logger.info(
    { address: settings.adminListen, tls: adminTls !== undefined },
    "admin API listening",
  );
  notifier.status(
    `serving: admin API on ${settings.adminListen}, snapshots on ${settings.grpcListen}`,
  );
  notifier.ready();
  startSupervision({
    env,
    logger,
    notifier,
    maxEventLoopDelayMs: settings.watchdogMaxEventLoopDelayMs,
    maxHeapRatio: settings.watchdogMaxHeapRatio,
  });

  // SIGTERM: fastify stops accepting, answers 503 + Connection: close on kept-alive sockets and
  // waits for requests in flight (up to drainTimeoutMs); then the snapshot streams end with
  // UNAVAILABLE so data planes move to the other replica. A second signal exits at once.
  onShutdownSignals({
    logger,
    notifier,
    deadlineMs: settings.drainTimeoutMs + CLOSE_GRACE_MS,
    stop: async () => {
      draining = true;
      notifier.status("stopping: draining admin requests");
      if (!(await settlesWithin(admin.close(), settings.drainTimeoutMs))) {
        logger.warn({ drainTimeoutMs: settings.drainTimeoutMs }, "admin drain timed out");
        admin.server.closeAllConnections();
      }
      await grpc.close(CLOSE_GRACE_MS);
      await quotaCounter?.stop();
      await probes?.stop();
      rollouts.stop();
      await remediation.stop(1_000);
      await election.stop();
      await fleetHealth.close();
      await records.stop();
      await expiries.stop();
      await journalFeed?.stop();
      await tokens.stop();
      sweeper?.stop();
      await builder.stop();
      await model.stop();
      await store.close();
    },
  });
}
