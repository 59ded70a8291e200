import {
  type EncodedOrResponse,
  type ReceivedRequest,
  receiveRequest,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import { Server, type ServerDuplexStream, type ServiceError, status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { Fleet } from "../fleet/fleet.js";
import type { QuotaMetrics } from "../metrics/quota-metrics.js";
import type { ProbeCoordination } from "../probe/probe-coordination.js";
import { ProbeCoordinator } from "../probe/probe-coordinator.js";
import { publishedUpstreamsOnly, upstreamNamed } from "../probe/published-upstreams-only.js";
import { QuotaLedger } from "../quota/quota-ledger.js";
import { quotaLedgerReports } from "../quota/quota-ledger-reports.js";
import { tenantLimits } from "../quota/tenant-limits.js";
import type { WindowCounter } from "../quota/window-counter.js";
import {
  channelSecurity,
  type GrpcServerTls,
  snapshotServerCredentials,
} from "./server-credentials.js";
import { serviceError } from "./service-error.js";
import { SnapshotEncodings } from "./snapshot-encodings.js";
import type { SnapshotPublisher } from "./snapshot-publisher.js";
import {
  type SnapshotStreamMetrics,
  StreamSession,
  type StreamSessionOptions,
  type VersionTargets,
} from "./stream-session.js";

export type ServerLogger = Pick<Logger, "debug" | "info" | "warn" | "error">;

export interface SnapshotServerOptions {
  /** host:port to listen on; port 0 picks a free port. */
  address: string;
  /** Where published snapshots come from. */
  builder: SnapshotPublisher;
  /** The shared bytes of each version; default a new cache with SNAPSHOT_PART_BYTES parts. */
  encodings?: SnapshotEncodings;
  /** Told about every stream, send, Ack and Nack. */
  fleet: Fleet;
  logger: ServerLogger;
  /** Counts NACKs, bytes and sends (clawgate_snapshot_*); default none. */
  metrics?: SnapshotStreamMetrics;
  /** Interval of HTTP/2 pings that detect a dead data plane; default 10 s. */
  keepaliveTimeMs?: number;
  /** A ping unanswered this long drops the connection; default 5 s. */
  keepaliveTimeoutMs?: number;
  /** TLS, or mutual TLS when it carries a client CA; default none (plaintext). */
  tls?: GrpcServerTls;
  /** Streams open at once, across all connections; one more is refused. Default 1024. */
  maxStreams?: number;
  /** Largest message a data plane may send; default MAX_RECEIVE_MESSAGE_BYTES (8 MiB). */
  maxReceiveMessageBytes?: number;
  /** A stream that sends no Hello this long is ended with DEADLINE_EXCEEDED; default 10 s. */
  helloTimeoutMs?: number;
  /** Keeps data planes outside a rollout's canaries on the version before it; default none. */
  targets?: VersionTargets;
  /** Told each data plane's request outcomes per version; default none. */
  outcomes?: StreamSessionOptions["outcomes"];
  /** Told each data plane's breakers that are not closed; default none. */
  breakers?: StreamSessionOptions["breakers"];
  /** Windows of the fleet-wide tenant budgets; default a minute and a day. */
  quotaWindows?: { minuteMs: number; dayMs: number };
  /**
   * The fleet's count of each tenant window, shared with the other control-plane replicas
   * (a StoredWindowCounter on etcd); default this replica counts alone.
   */
  quotaCounter?: WindowCounter;
  /** Counts budgets spent fleet-wide and failed writes of their shared count; default none. */
  quotaMetrics?: QuotaMetrics;
  /**
   * Half-open probe claims, shared with the other control-plane replicas (a
   * StoredProbeCoordinator on etcd); default this replica coordinates its data planes alone.
   */
  probes?: ProbeCoordination;
}

/**
 * Data planes send small messages but one: a Hello or Ack is under 1 KiB within STREAM_LIMITS,
 * while a node-health report costs about 150 bytes a node, so a data plane of 20,000 nodes
 * sends about 3 MB; 8 MiB holds some 55,000 nodes' report. The bound is checked by grpc-js
 * before a message is decoded, so a client cannot make the server buffer more than this per
 * stream (gRPC's own default is 4 MiB, which a 20,000-node report would nearly reach).
 */
export const MAX_RECEIVE_MESSAGE_BYTES = 8 * 1024 * 1024;

/**
 * Largest message the server writes. A data plane that takes deltas gets snapshots in parts of
 * SNAPSHOT_PART_BYTES (bigger only for a single resource bigger than that, and a resource is one
 * etcd value, under 1.5 MiB) and no delta over that size. A data plane older than parts gets
 * each snapshot as one message, as before; 64 MiB is what such a data plane accepts, so a
 * snapshot it could not read is refused here, with a status, rather than at its end.
 */
export const MAX_SEND_MESSAGE_BYTES = 64 * 1024 * 1024;

/** Default of maxStreams: room for a large fleet and its reconnects, but a bounded one. */
export const DEFAULT_MAX_STREAMS = 1024;

/**
 * Streams one HTTP/2 connection may carry at once. A data plane uses one stream at a time (two
 * for a moment while it reconnects); the bound keeps a single client from taking every slot of
 * maxStreams over one connection. Further streams wait in the client for a free slot.
 */
const MAX_STREAMS_PER_CONNECTION = 4;

export interface SnapshotServer {
  /** The bound port (the chosen one when the address asked for port 0). */
  port: number;
  /** Ends every stream with UNAVAILABLE, then stops; forces it after `graceMs` (default 5 s). */
  close(graceMs?: number): Promise<void>;
}

type SnapshotCall = ServerDuplexStream<ReceivedRequest, EncodedOrResponse>;

/**
 * The service as this server reads it: a node-health report is scanned, not decoded, in
 * grpc-js's turn, and the stream decodes it a slice at a time (HealthIntake).
 */
const receivingDefinition = {
  streamSnapshots: {
    ...snapshotServiceDefinition.streamSnapshots,
    requestDeserialize: receiveRequest,
  },
};

/**
 * Serves clawgate.v1.SnapshotService: one bidi stream per data plane, a whole snapshot first and
 * deltas after. Streams share each version's encoded bytes (SnapshotEncodings), so a publish
 * costs one encode of the whole and one of the delta however many data planes are connected.
 */
export async function startSnapshotServer(options: SnapshotServerOptions): Promise<SnapshotServer> {
  const { builder, fleet, logger } = options;
  const server = new Server({
    "grpc.keepalive_time_ms": options.keepaliveTimeMs ?? 10_000,
    "grpc.keepalive_timeout_ms": options.keepaliveTimeoutMs ?? 5_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.max_receive_message_length": options.maxReceiveMessageBytes ?? MAX_RECEIVE_MESSAGE_BYTES,
    "grpc.max_concurrent_streams": MAX_STREAMS_PER_CONNECTION,
    "grpc.max_send_message_length": MAX_SEND_MESSAGE_BYTES,
  });
  const encodings = options.encodings ?? new SnapshotEncodings();
  const maxStreams = options.maxStreams ?? DEFAULT_MAX_STREAMS;
  const sessions = new Set<StreamSession>();
  let closing = false;
  // Budgets and probes are shared by every stream of this server: data planes connected to
  // the same control plane share one fleet-wide budget per tenant.
  const quota = new QuotaLedger({
    limitOf: tenantLimits(() => builder.current()?.snapshot.tenants ?? []),
    holders: () => Math.max(1, sessions.size),
    now: Date.now,
    ...options.quotaWindows,
    counter: options.quotaCounter,
    ...quotaLedgerReports(logger, options.quotaMetrics),
  });
  const probes = publishedUpstreamsOnly(
    options.probes ?? new ProbeCoordinator({ now: () => performance.now() }),
    upstreamNamed(() => builder.current()?.snapshot.upstreams ?? []),
  );

  const current = builder.current();
  if (current !== undefined) fleet.setPublished(current.version);
  const unsubscribe = builder.onPublish((published) => fleet.setPublished(published.version));

  server.addService(receivingDefinition, {
    streamSnapshots(call: SnapshotCall) {
      if (closing) {
        call.emit("error", unavailable());
        return;
      }
      if (sessions.size >= maxStreams) {
        // Refused before a session exists, so the stream holds no memory and no fleet entry.
        logger.warn(
          { peer: peerOf(call), open: sessions.size, maxStreams },
          "refusing a snapshot stream: too many open streams (grpcMaxStreams)",
        );
        call.emit(
          "error",
          serviceError(
            status.RESOURCE_EXHAUSTED,
            `the control plane already serves ${sessions.size} snapshot streams, its limit (grpcMaxStreams ${maxStreams})`,
          ),
        );
        return;
      }
      const session = new StreamSession({
        call,
        builder,
        encodings,
        fleet,
        logger,
        metrics: options.metrics,
        helloTimeoutMs: options.helloTimeoutMs ?? 10_000,
        targets: options.targets,
        outcomes: options.outcomes,
        breakers: options.breakers,
        quota,
        probes,
        onClosed: () => sessions.delete(session),
      });
      sessions.add(session);
    },
  });

  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      server.bindAsync(options.address, snapshotServerCredentials(options.tls), (error, bound) =>
        error ? reject(error) : resolve(bound),
      );
    });
  } catch (error) {
    unsubscribe();
    server.forceShutdown();
    throw error;
  }
  logger.info(
    { address: options.address, port, security: channelSecurity(options.tls) },
    "snapshot server listening",
  );

  return {
    port,
    async close(graceMs = 5_000) {
      if (closing) return;
      closing = true;
      unsubscribe();
      quota.close();
      // Streams never finish on their own, so tryShutdown would wait forever: end them first,
      // with UNAVAILABLE so data planes reconnect (to another replica, or to this one reborn).
      for (const session of [...sessions]) session.fail(unavailable());
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      logger.info({ port }, "snapshot server closed");
    },
  };
}

function peerOf(call: SnapshotCall): string {
  try {
    return call.getPeer();
  } catch {
    return "unknown";
  }
}

function unavailable(): ServiceError {
  return serviceError(status.UNAVAILABLE, "control plane is shutting down");
}
