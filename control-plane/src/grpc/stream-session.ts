import {
  type Ack,
  create,
  type EncodedOrResponse,
  HEALTH_CHANGES_HEADER,
  type Hello,
  type Nack,
  PROTOCOL_VERSION,
  ReceivedHealthReport,
  type ReceivedRequest,
  StreamSnapshotsResponseSchema,
} from "@clawgate/proto";
import { Metadata, type ServerDuplexStream, type ServiceError, status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { Fleet, StreamToken } from "../fleet/fleet.js";
import type { ProbeCoordination, ProbeParty } from "../probe/probe-coordination.js";
import type { LeaseGrant, QuotaLedger } from "../quota/quota-ledger.js";
import type { ReportedBreaker } from "../replicas/data-plane-record.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";
import { decodedReport, HealthIntake, type HealthReportSource } from "./health-intake.js";
import {
  checkAnswer,
  checkBreakerReport,
  checkHello,
  checkProbeClaim,
  checkQuotaUsage,
} from "./request-bounds.js";
import { serviceError } from "./service-error.js";
import type { EncodingKind, SnapshotEncodings } from "./snapshot-encodings.js";
import type { SnapshotPublisher } from "./snapshot-publisher.js";

/** What the snapshot server counts; every method optional but recordNack. */
export interface SnapshotStreamMetrics {
  /** One refusal (clawgate_snapshot_nacks_total). */
  recordNack(): void;
  /** Bytes of one message written to a stream (clawgate_snapshot_bytes_sent_total). */
  recordSent?(bytes: number): void;
  /** One snapshot sent whole (in however many parts) or as a delta (clawgate_snapshot_sends_total). */
  recordSend?(kind: EncodingKind): void;
}

/** Counts of requests a data plane answered on one version (OutcomeReport). */
export interface ReportedOutcome {
  version: number;
  requests: number;
  failures: number;
}

/** Most versions one OutcomeReport may list; a data plane sends its newest three. */
const MAX_OUTCOME_VERSIONS = 16;

/**
 * Which version each data plane is to serve, when not simply the newest: a progressive
 * rollout keeps the data planes outside its canaries on the version before it.
 */
export interface VersionTargets {
  /**
   * The snapshot `nodeId` is to serve instead of the newest; "hold": send it nothing new (the
   * version to keep it on is not in memory); undefined: the newest.
   */
  pinned(nodeId: string): PublishedSnapshot | "hold" | undefined;
  /** Calls `listener` when pins change, so streams offer again; returns the unsubscribe. */
  onChange(listener: () => void): () => void;
}

export interface StreamSessionOptions {
  call: ServerDuplexStream<ReceivedRequest, EncodedOrResponse>;
  builder: Pick<SnapshotPublisher, "current" | "onPublish">;
  /** The bytes of each version, shared by every stream of the server. */
  encodings: SnapshotEncodings;
  fleet: Fleet;
  logger: Pick<Logger, "debug" | "info" | "warn" | "error">;
  metrics?: SnapshotStreamMetrics | undefined;
  /** Called once when the stream is over, however it ended. */
  onClosed(): void;
  /** A stream without a Hello this long is ended, freeing its grpcMaxStreams slot. */
  helloTimeoutMs: number;
  /** Pins data planes to a version during a rollout; default none (everyone gets the newest). */
  targets?: VersionTargets | undefined;
  /** Told each OutcomeReport; default none. */
  outcomes?: ((nodeId: string, versions: readonly ReportedOutcome[]) => void) | undefined;
  /** Told each BreakerReport (the data plane's breakers that are not closed); default none. */
  breakers?: ((nodeId: string, breakers: readonly ReportedBreaker[]) => void) | undefined;
  /** Fleet-wide tenant budgets this stream's data plane leases shares of; default none. */
  quota?: QuotaLedger | undefined;
  /** Half-open probes serialized across the fleet; default none. */
  probes?: ProbeCoordination | undefined;
}

type ResponseMessage = NonNullable<
  Parameters<typeof create<typeof StreamSnapshotsResponseSchema>>[1]
>["message"];

/** Tells apart the streams of one data plane (a reconnect overlaps the old stream briefly). */
let streamSerial = 0;

interface Identity {
  nodeId: string;
  stream: StreamToken;
}

/** A snapshot written on the stream and not answered yet. */
interface Sent {
  version: number;
  nonce: string;
  kind: EncodingKind;
}

/**
 * One data plane's stream: waits for Hello, then sends each published snapshot that differs
 * from what the data plane applied and that it has not refused, and records its answers. A
 * snapshot goes as a delta when the data plane takes deltas and will be on the delta's base once
 * it has processed what was sent before; otherwise whole (in parts when big).
 */
export class StreamSession {
  private readonly call: StreamSessionOptions["call"];
  private readonly builder: StreamSessionOptions["builder"];
  private readonly encodings: SnapshotEncodings;
  private readonly fleet: Fleet;
  private readonly logger: StreamSessionOptions["logger"];
  private readonly metrics: StreamSessionOptions["metrics"];
  private readonly onClosed: () => void;
  private readonly targets: VersionTargets | undefined;
  private readonly outcomes: StreamSessionOptions["outcomes"];
  private readonly breakers: StreamSessionOptions["breakers"];
  private unsubscribeTargets: (() => void) | undefined;
  private readonly quota: QuotaLedger | undefined;
  private readonly probes: ProbeCoordination | undefined;
  /** This stream as a holder of leases and probes; set at Hello. */
  private party: ProbeParty | undefined;

  private identity: Identity | undefined;
  private acceptsDeltas = false;
  /** Newest version the data plane acknowledged (or said in Hello it had applied). */
  private applied = 0;
  /**
   * The version the data plane will be serving once it has processed everything sent: the last
   * one sent and not refused, else what it applied. Undefined when that is not known (after a
   * refusal, or a delta it could not apply): the next send is then whole.
   */
  private serving: number | undefined;
  /** Snapshots sent and not yet answered, in the order sent (answers come in that order). */
  private readonly outstanding: Sent[] = [];
  /** Messages of the snapshot being written; once started, a snapshot goes out whole. */
  private queue: readonly Uint8Array[] = [];
  private queued = 0;
  /** The transport buffer is full; writing resumes on 'drain', then the newest snapshot goes. */
  private blocked = false;
  private unsubscribe: (() => void) | undefined;
  private closed = false;
  /** The data plane ended its writes; the stream ends once its reports are taken in. */
  private ending = false;
  private helloTimer: NodeJS.Timeout | undefined;
  /** The data plane sent its whole health view on this stream: changes-only reports build on it. */
  private healthViewSent = false;
  /** Takes this stream's health reports in, in order and in slices; set at Hello. */
  private healthIntake: HealthIntake | undefined;

  constructor(options: StreamSessionOptions) {
    this.call = options.call;
    this.builder = options.builder;
    this.encodings = options.encodings;
    this.fleet = options.fleet;
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.onClosed = options.onClosed;
    this.targets = options.targets;
    this.outcomes = options.outcomes;
    this.breakers = options.breakers;
    this.quota = options.quota;
    this.probes = options.probes;
    // Otherwise streams that never say Hello could hold every slot and keep data planes out.
    this.helloTimer = setTimeout(() => {
      this.logger.warn({ peer: this.peer() }, "ending a snapshot stream that sent no Hello");
      this.fail(
        serviceError(
          status.DEADLINE_EXCEEDED,
          `no Hello within ${options.helloTimeoutMs} ms of opening the stream`,
        ),
      );
    }, options.helloTimeoutMs);
    this.helloTimer.unref();
    // Said at once, in the response headers, so a data plane knows before its first health
    // report after Hello whether this control plane takes changes-only reports (issue 9).
    const headers = new Metadata();
    headers.set(HEALTH_CHANGES_HEADER, "1");
    this.call.sendMetadata(headers);
    this.call.on("data", (request: ReceivedRequest) => this.onRequest(request));
    // The data plane half-closed: it wants no more snapshots, and has sent all it will.
    this.call.on("end", () => this.onEnd());
    this.call.on("cancelled", () => this.cleanup("stream cancelled"));
    this.call.on("close", () => this.cleanup("stream closed"));
    this.call.on("error", (error: Error) => this.cleanup(`stream failed: ${error.message}`));
    this.call.on("drain", () => {
      this.blocked = false;
      this.flush();
      // Versions published while blocked were skipped: only the newest is worth sending now.
      this.offer(this.builder.current());
    });
  }

  /**
   * The data plane ended its writes. The health reports it sent before are taken in first, in
   * order, while the stream is still its current one: handled at once, its end would drop them
   * and leave its view here stale for the reconnect grace (FleetHealth drops a disconnected data
   * plane's report only then). The stream is answered and cleaned up once they are.
   *
   * A stream that breaks meanwhile (cancelled, failed, or ended by this control plane) drops
   * what is still waiting, as one that breaks with reports waiting always does: its data plane
   * sends its whole view first on the stream it opens next, which supersedes them, and a control
   * plane shutting down takes nothing more in. Reports of a stream its data plane replaced (a
   * reconnect, here or to another replica) are dropped at the hand-over (Fleet.healthReported):
   * the new stream's reports are newer, and applying the old ones after would roll it back.
   */
  private onEnd(): void {
    if (this.closed || this.ending) return;
    this.ending = true;
    // Nothing more is sent; the data plane said it wants no more.
    this.stopOffering();
    const finish = () => {
      if (this.closed) return;
      this.cleanup("data plane ended the stream");
      this.call.end();
    };
    const intake = this.healthIntake;
    if (intake === undefined) finish();
    else void intake.idle().then(finish);
  }

  /** Ends the stream with `error` as its status. */
  fail(error: ServiceError): void {
    if (this.closed) return;
    this.cleanup(`ended by the control plane: ${error.details}`);
    // grpc-js turns an 'error' emitted on a server stream into the call's final status.
    this.call.emit("error", error);
  }

  private onRequest(request: ReceivedRequest): void {
    if (this.closed) return;
    if (request instanceof ReceivedHealthReport) {
      if (this.identity === undefined) {
        this.fail(
          serviceError(status.INVALID_ARGUMENT, "the first message on a stream must be Hello"),
        );
      } else this.onHealth(this.identity, request);
      return;
    }
    const message = request.message;
    if (this.identity === undefined) {
      if (message.case !== "hello") {
        this.fail(
          serviceError(status.INVALID_ARGUMENT, "the first message on a stream must be Hello"),
        );
        return;
      }
      this.onHello(message.value);
      return;
    }
    switch (message.case) {
      case "ack": {
        const ack = checkAnswer("Ack", message.value);
        if (ack.ok) this.onAck(this.identity, ack.value);
        else this.refuse(ack.reason);
        return;
      }
      case "nack": {
        const nack = checkAnswer("Nack", message.value);
        if (nack.ok) this.onNack(this.identity, nack.value);
        else this.refuse(nack.reason);
        return;
      }
      case "health":
        // Decoded whole: a report with a field only the generic decoder keeps.
        this.onHealth(this.identity, decodedReport(message.value));
        return;
      case "outcomes": {
        const versions = message.value.versions;
        if (versions.length > MAX_OUTCOME_VERSIONS) {
          this.refuse(
            `OutcomeReport lists ${versions.length} versions; at most ${MAX_OUTCOME_VERSIONS}`,
          );
          return;
        }
        this.outcomes?.(
          this.identity.nodeId,
          versions.map((v) => ({
            version: Number(v.version),
            requests: Number(v.requests),
            failures: Number(v.failures),
          })),
        );
        return;
      }
      case "breakers": {
        // State of the world: the report replaces whatever this data plane said before.
        const breakers = checkBreakerReport(message.value.breakers);
        if (breakers.ok) this.breakers?.(this.identity.nodeId, breakers.value);
        else this.refuse(breakers.reason);
        return;
      }
      case "quotaUsage": {
        const entries = checkQuotaUsage(message.value.entries);
        if (!entries.ok) {
          this.refuse(entries.reason);
          return;
        }
        const party = this.party;
        if (this.quota === undefined || party === undefined) return;
        this.sendGrants(this.quota.report(party.id, entries.value));
        return;
      }
      case "probeClaim": {
        const claim = checkProbeClaim(message.value);
        if (!claim.ok) {
          this.refuse(claim.reason);
          return;
        }
        const party = this.party;
        if (this.probes === undefined || party === undefined) return;
        if (claim.value.released)
          this.probes.release(party, claim.value.upstream, claim.value.success);
        else this.probes.claim(party, claim.value.upstream);
        return;
      }
      case "hello":
        this.fail(serviceError(status.INVALID_ARGUMENT, "Hello may be sent only once per stream"));
        return;
      default:
        // An empty or newer message kind: nothing this control plane can act on.
        this.logger.debug({ nodeId: this.identity.nodeId }, "ignoring an empty stream message");
    }
  }

  /**
   * A node-health report: the data plane's whole view (state of the world), or what changed in
   * it since its previous report, whose cost follows the changes. Changes need a view to apply
   * on: without a whole report on this stream first (a data plane that broke the protocol), the
   * stream is refused, so the data plane starts again with a Hello and its whole view rather
   * than leave this replica's view of it wrong. Reports are taken in in order, in slices.
   */
  private onHealth(identity: Identity, report: HealthReportSource): void {
    if (!report.changesOnly) this.healthViewSent = true;
    else if (!this.healthViewSent) {
      const reason =
        "NodeHealthReport with changes_only before any whole report on this stream; send the whole view first after Hello";
      this.logger.warn(
        { nodeId: identity.nodeId, peer: this.peer(), reason },
        "refusing a changes-only health report with no whole view to apply it on",
      );
      this.fail(serviceError(status.INVALID_ARGUMENT, reason));
      return;
    }
    this.healthIntake ??= new HealthIntake({
      fleet: this.fleet,
      nodeId: identity.nodeId,
      stream: identity.stream,
      refuse: (reason, undecodable) => {
        if (!undecodable) {
          this.refuse(reason);
          return;
        }
        this.logger.warn(
          { nodeId: identity.nodeId, peer: this.peer(), reason },
          "refusing a health report whose bytes cannot be decoded",
        );
        this.fail(serviceError(status.INVALID_ARGUMENT, reason));
      },
      // A paused stream's ACKs, probe claims and quota usage wait too, and that is kept: one
      // stream's messages arrive in order, so reading on to an ACK behind a report means
      // holding that report, which is the memory the bound is there to cap, or dropping it,
      // which would leave this data plane's view wrong (a changes-only report builds on every
      // report before it). The bound counts bytes, so only whole reports sent faster than
      // they are taken in reach it (MAX_BACKLOG_BYTES), never a data plane's changes.
      onBacklog: (full) => {
        if (this.closed) return;
        if (full) this.call.pause();
        else this.call.resume();
      },
    });
    this.healthIntake.take(report);
  }

  /**
   * Ends a stream whose message breaks a bound in STREAM_LIMITS. The reason names the field,
   * its size and the limit, never the value, so the log line stays small too.
   */
  private refuse(reason: string): void {
    this.logger.warn(
      { nodeId: this.identity?.nodeId, peer: this.peer(), reason },
      "refusing a stream message over its size limit",
    );
    this.fail(serviceError(status.INVALID_ARGUMENT, reason));
  }

  private onHello(hello: Hello): void {
    // Before anything else, so nothing unbounded reaches a log line or the fleet.
    const bounded = checkHello(hello);
    if (!bounded.ok) {
      this.refuse(bounded.reason);
      return;
    }
    if (hello.protocolVersion !== PROTOCOL_VERSION) {
      this.logger.warn(
        { nodeId: hello.nodeId, protocolVersion: hello.protocolVersion, peer: this.peer() },
        "refusing a data plane that speaks another protocol version",
      );
      this.fail(
        serviceError(
          status.FAILED_PRECONDITION,
          `protocol version ${hello.protocolVersion} is not supported: this control plane speaks protocol version ${PROTOCOL_VERSION}`,
        ),
      );
      return;
    }
    if (hello.nodeId === "") {
      this.fail(serviceError(status.INVALID_ARGUMENT, "Hello.nodeId must not be empty"));
      return;
    }
    clearTimeout(this.helloTimer);
    this.applied = Number(hello.lastAppliedVersion);
    // A version is the revision of the config's newest change, the same on every replica, so a
    // data plane coming from another replica is on the version this one publishes (nothing to
    // send) or on a base a delta can apply on.
    this.serving = this.applied > 0 ? this.applied : undefined;
    this.acceptsDeltas = hello.acceptsDeltas;
    this.identity = { nodeId: hello.nodeId, stream: this.fleet.connected(hello.nodeId, hello) };
    this.party = {
      id: `${hello.nodeId}#${++streamSerial}`,
      nodeId: hello.nodeId,
      send: (verdict) =>
        this.send({
          case: "probeVerdict",
          value: { ...verdict, leaseMs: BigInt(verdict.leaseMs) },
        }),
    };
    // A budget spent fleet-wide is pushed to this data plane unasked (a revoked lease).
    this.quota?.connect(this.party.id, (grants) => this.sendGrants(grants));
    this.logger.info(
      {
        nodeId: hello.nodeId,
        hostname: hello.hostname,
        softwareVersion: hello.softwareVersion,
        lastAppliedVersion: this.applied,
        acceptsDeltas: this.acceptsDeltas,
        peer: this.peer(),
      },
      "data plane connected",
    );
    this.unsubscribe = this.builder.onPublish((published) => this.offer(published));
    this.unsubscribeTargets = this.targets?.onChange(() => this.offer(this.builder.current()));
    this.offer(this.builder.current());
  }

  private onAck(identity: Identity, ack: Ack): void {
    const sent = this.answered(identity, ack, "Ack");
    if (sent === undefined) return;
    const { version } = sent;
    this.applied = version;
    this.fleet.acked(identity.nodeId, version);
    this.logger.debug({ nodeId: identity.nodeId, version }, "data plane applied snapshot");
  }

  private onNack(identity: Identity, nack: Nack): void {
    const sent = this.answered(identity, nack, "Nack");
    if (sent === undefined) return;
    const { version } = sent;
    // A whole snapshot already on its way brings the data plane to a known version whatever
    // it made of the deltas before it.
    const wholeOnItsWay = this.outstanding.some((later) => later.kind === "full");
    // Asking for a whole snapshot in answer to one would loop forever: that is a refusal.
    if (nack.wantsFullSnapshot && sent.kind === "delta") {
      this.logger.info(
        { nodeId: identity.nodeId, version, detail: nack.errorDetail },
        "data plane is not on the delta's base; sending the whole snapshot",
      );
      if (wholeOnItsWay) return;
      this.serving = undefined;
      this.offer(this.builder.current());
      return;
    }
    // The data plane stays on its last good version, which no delta to come is based on.
    if (!wholeOnItsWay) this.serving = undefined;
    this.fleet.nacked(identity.nodeId, version, nack.errorDetail);
    this.metrics?.recordNack();
    this.logger.warn(
      { nodeId: identity.nodeId, version, error: nack.errorDetail },
      "data plane refused snapshot; it keeps serving its last good one",
    );
  }

  /** The send an Ack or Nack answers, or undefined when it answers nothing sent here. */
  private answered(identity: Identity, answer: Ack | Nack, kind: string): Sent | undefined {
    const index = this.outstanding.findIndex(
      (sent) => sent.nonce === answer.nonce && BigInt(sent.version) === answer.version,
    );
    if (index < 0) {
      this.logger.warn(
        { nodeId: identity.nodeId, nonce: answer.nonce, version: Number(answer.version) },
        `ignoring ${kind} whose nonce does not match a snapshot sent on this stream`,
      );
      return undefined;
    }
    // Answers come in order, so older sends will never be answered now.
    return this.outstanding.splice(0, index + 1)[index];
  }

  /** Stops following publishes and rollout targets (once: a second call does nothing). */
  private stopOffering(): void {
    this.unsubscribe?.();
    this.unsubscribeTargets?.();
    this.unsubscribe = undefined;
    this.unsubscribeTargets = undefined;
  }

  private offer(newest: PublishedSnapshot | undefined): void {
    const identity = this.identity;
    if (newest === undefined || identity === undefined || this.closed || this.ending) return;
    if (this.blocked || this.queued < this.queue.length) return;
    const pin = this.targets?.pinned(identity.nodeId);
    if (pin === "hold") return;
    const published = pin ?? newest;
    const { version } = published;
    if (version === this.serving) return;
    // A refused version is never sent again, whole or as a delta: it would only be refused again.
    if (this.fleet.refused(identity.nodeId, version)) return;
    const delta =
      this.acceptsDeltas &&
      this.serving !== undefined &&
      published.delta?.baseVersion === BigInt(this.serving)
        ? this.encodings.delta(published)
        : undefined;
    const kind: EncodingKind = delta === undefined ? "full" : "delta";
    this.queue =
      delta !== undefined
        ? [delta]
        : this.acceptsDeltas
          ? this.encodings.full(published)
          : [this.encodings.whole(published)];
    this.queued = 0;
    this.serving = version;
    // A snapshot in parts is one send: one nonce, answered once.
    this.outstanding.push({ version, nonce: published.nonce, kind });
    this.metrics?.recordSend?.(kind);
    this.logger.debug(
      { nodeId: identity.nodeId, version, kind, messages: this.queue.length },
      "sending snapshot",
    );
    this.flush();
  }

  private sendGrants(leases: readonly LeaseGrant[]): void {
    if (leases.length === 0) return;
    this.send({
      case: "quotaGrant",
      value: {
        leases: leases.map((lease) => ({
          ...lease,
          window: BigInt(lease.window),
          granted: BigInt(lease.granted),
          resetsInMs: BigInt(Math.max(0, lease.resetsInMs)),
        })),
      },
    });
  }

  /**
   * Writes a small message (a quota grant, a probe verdict) at once, between snapshot parts if
   * need be: the data plane handles them apart from snapshots, and they must not wait behind a
   * big snapshot. A full transport buffer only queues it in grpc-js.
   */
  private send(message: ResponseMessage): void {
    if (this.closed) return;
    this.call.write(create(StreamSnapshotsResponseSchema, { message }));
  }

  /** Writes queued messages until the transport pushes back; 'drain' resumes. */
  private flush(): void {
    while (!this.closed && !this.blocked && this.queued < this.queue.length) {
      const message = this.queue[this.queued++] as Uint8Array;
      // The shared bytes go out as they are; responseSerialize passes a Uint8Array through.
      this.metrics?.recordSent?.(message.byteLength);
      if (!this.call.write(message)) this.blocked = true;
    }
  }

  private cleanup(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.helloTimer);
    this.queue = [];
    this.healthIntake?.close();
    this.stopOffering();
    if (this.party !== undefined) {
      // What this data plane held goes back to the fleet; a probe it held is released.
      this.quota?.release(this.party.id);
      this.probes?.leave(this.party);
    }
    if (this.identity !== undefined) {
      this.fleet.disconnected(this.identity.nodeId, this.identity.stream);
      this.logger.info({ nodeId: this.identity.nodeId, reason }, "data plane disconnected");
    }
    this.onClosed();
  }

  private peer(): string {
    try {
      return this.call.getPeer();
    } catch {
      return "unknown";
    }
  }
}
