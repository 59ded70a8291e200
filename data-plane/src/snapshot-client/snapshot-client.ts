import {
  type BreakerPhase,
  create,
  type EncodedOrRequest,
  fromBinary,
  HEALTH_CHANGES_HEADER,
  type NodeHealth,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_TRAILER,
  type ProbeVerdict,
  type QuotaGrant,
  type Snapshot,
  type SnapshotDelta,
  StreamSnapshotsRequestSchema,
  type StreamSnapshotsResponse,
  StreamSnapshotsResponseSchema,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import { Backoff } from "@clawgate/runtime";
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { HealthChange } from "../health/node-health.js";
import {
  type ChannelSecurity,
  describeChannelSecurity,
  type SnapshotChannelTls,
  snapshotChannelSecurity,
} from "./channel-credentials.js";
import type { ConnectionState, ConnectionStateListener } from "./connection-state.js";
import { DECODE_AT_ONCE_BYTES, decodeResponse } from "./decode-in-turns.js";
import { HEALTH_NODES_PER_TURN, HealthReportEncoder } from "./health-report-bytes.js";
import { type HealthReportSource, HealthStream } from "./health-stream.js";
import { SnapshotParts } from "./snapshot-parts.js";

export type ApplyResult = { ok: true } | { ok: false; reason: string };

/** The outcome of a whole snapshot's apply; undefined when a newer one superseded it mid-way. */
export type SnapshotApplyResult = ApplyResult | undefined;

export type SnapshotClientLogger = Pick<Logger, "debug" | "info" | "warn" | "error">;

export interface SnapshotClientOptions {
  /** Control planes as host:port, tried in order; each lost stream moves to the next. */
  addresses: readonly string[];
  nodeId: string;
  hostname: string;
  softwareVersion: string;
  /**
   * Applies a whole snapshot; a failure is NACKed with its reason and the last good one stays.
   * It may take several event-loop turns (a promise); `superseded()` turns true once a newer
   * snapshot is waiting, and an apply that then gives up resolves to undefined: nothing is
   * answered for that version, the newer one is applied next.
   */
  apply: (
    snapshot: Snapshot,
    superseded: () => boolean,
  ) => SnapshotApplyResult | Promise<SnapshotApplyResult>;
  /**
   * Applies a delta on top of the version served (the client has checked its base_version);
   * given, the Hello says the data plane accepts deltas. Default none: whole snapshots only.
   * It may answer later (a promise: a data plane with workers applies it in each of them);
   * the next update waits for it. Undefined applied nothing and answers nothing (a data plane
   * with workers that is stopping starts no apply).
   */
  applyDelta?: (delta: SnapshotDelta) => SnapshotApplyResult | Promise<SnapshotApplyResult>;
  /** Version being served, sent in each Hello; 0 when none. */
  lastAppliedVersion: () => number;
  logger: SnapshotClientLogger;
  /** Reconnect backoff; default base 250 ms, max 10 s, full jitter. */
  backoff?: { baseMs?: number; maxMs?: number };
  /** Uniform random in [0, 1) for the jitter; default Math.random. */
  random?: () => number;
  /** Monotonic ms that times each apply (`applyMs` of "snapshot applied"); default performance.now. */
  clock?: () => number;
  /** A control plane that gives no ready connection within this is skipped; default 5 s. */
  connectTimeoutMs?: number;
  /** grpc-js channel options laid over the keepalive defaults below. */
  channelOptions?: grpc.ChannelOptions;
  /** TLS to the control planes, mutual when it carries a client certificate; default plaintext. */
  tls?: SnapshotChannelTls;
  /** Shares of fleet-wide tenant budgets the control plane hands out (LeaseBook.grant). */
  onQuotaGrant?: (grant: QuotaGrant) => void;
  /** Who probes a fleetProbe upstream, and how the last probe went. */
  onProbeVerdict?: (verdict: ProbeVerdict) => void;
  /**
   * The node-health view `reportHealth` reports from: after each Hello its whole view, then
   * only what changed where the control plane takes that (HEALTH_CHANGES_HEADER), whole views
   * elsewhere. Default none (`sendHealth` gives whole views instead).
   */
  health?: HealthReportSource;
}

/**
 * Keepalive pings notice a control plane that vanished without closing the connection (host
 * down, partition) within about 20 s, instead of waiting for TCP to give up.
 */
const DEFAULT_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.keepalive_time_ms": 15_000,
  "grpc.keepalive_timeout_ms": 5_000,
  "grpc.keepalive_permit_without_calls": 1,
  // A snapshot is the whole config; 4 MiB (the gRPC default) is too small for a large fleet.
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
};

type RequestInit = NonNullable<Parameters<typeof create<typeof StreamSnapshotsRequestSchema>>[1]>;

/** One version's counts as sendOutcomes takes them. */
export interface VersionOutcomeInit {
  version: bigint;
  requests: bigint;
  failures: bigint;
}

/** One BreakerState as sendBreakers takes it. */
export interface BreakerStateInit {
  readonly upstream: string;
  readonly phase: BreakerPhase;
  readonly sinceMs: bigint;
  readonly cooldownUntilMs: bigint;
}

/** One QuotaConsumption as sendQuotaUsage takes it. */
export interface ConsumptionInit {
  readonly tenant: string;
  readonly kind: number;
  readonly window: bigint;
  readonly consumed: bigint;
  readonly wantsMore: boolean;
}

/** A ProbeClaim as sendProbeClaim takes it. */
export interface ProbeClaimInit {
  readonly upstream: string;
  readonly episode?: bigint;
  readonly released?: boolean;
  readonly success?: boolean;
}

type Update =
  | { readonly kind: "snapshot"; readonly snapshot: Snapshot }
  | { readonly kind: "delta"; readonly delta: SnapshotDelta };

interface Attempt {
  readonly address: string;
  readonly client: grpc.Client;
  /** Responses arrive as bytes: a whole config decodes across turns (decodeResponse). */
  readonly call: grpc.ClientDuplexStream<EncodedOrRequest, Buffer>;
  /** The decode of a big message in progress; later messages wait for it, to stay in order. */
  decoding: Promise<void> | undefined;
  /** Set once the stream delivered a snapshot: proof the control plane was healthy. */
  delivered: boolean;
  timedOut: boolean;
  ended: boolean;
  /** The stream's buffer was full at the last health write; the next waits for "drain". */
  healthBlocked: boolean;
  /** A newer health report arrived while blocked; it is written on "drain". */
  healthPending: boolean;
  /** Snapshots and deltas received and not yet applied, in arrival order. */
  readonly queue: Update[];
  /** True while the queue is being worked through (an apply may span turns). */
  applying: boolean;
  readonly parts: SnapshotParts;
  /** The stream's node-health reports, with `health`. */
  readonly health: HealthStream | undefined;
  readonly closed: Promise<void>;
  markClosed(): void;
}

/**
 * Keeps one snapshot stream open to a control plane: says Hello, applies each snapshot and
 * answers Ack or Nack, and on any end reconnects with jittered backoff to the next address,
 * so a second control plane takes over when the first goes away. The data plane's node-health
 * report rides the same stream (`sendHealth`).
 */
export class SnapshotClient {
  readonly #options: SnapshotClientOptions;
  readonly #now: () => number;
  readonly #backoff: Backoff;
  /** Built once: every reconnect reuses the same TLS context. */
  readonly #security: ChannelSecurity;
  readonly #listeners = new Set<ConnectionStateListener>();
  #state: ConnectionState = { status: "idle" };
  #index = 0;
  #attempt: Attempt | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** The last breaker report, sent again after every Hello; undefined until one is given. */
  #breakers: BreakerStateInit[] | undefined;
  /** The last node-health report, encoded, sent again after every Hello; undefined until one is given. */
  #health: Uint8Array | undefined;
  /** Reports being encoded over several turns, in order; a small one given meanwhile waits too. */
  #healthEncoding = 0;
  #healthQueue: Promise<void> = Promise.resolve();
  readonly #healthEncoder = new HealthReportEncoder();

  constructor(options: SnapshotClientOptions) {
    if (options.addresses.length === 0) throw new RangeError("SnapshotClient needs an address");
    this.#options = options;
    this.#now = options.clock ?? (() => performance.now());
    this.#backoff = new Backoff({ ...options.backoff, random: options.random });
    this.#security = snapshotChannelSecurity(options.tls);
  }

  state(): ConnectionState {
    return this.#state;
  }

  /** Calls the listener on every state change; returns a function that unsubscribes. */
  onStateChange(listener: ConnectionStateListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  start(): void {
    if (this.#stopped || this.#state.status !== "idle") return;
    const { addresses, tls, logger } = this.#options;
    logger.info(
      { controlPlanes: addresses, security: describeChannelSecurity(tls) },
      "streaming snapshots from the control planes",
    );
    this.#connect();
  }

  /** Ends the stream and stops reconnecting; resolves once the stream is closed. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retryTimer);
    const attempt = this.#attempt;
    attempt?.call.cancel();
    this.#setState({ status: "stopped" });
    await attempt?.closed;
  }

  /**
   * Sends the data plane's whole node-health view (state of the world) on the open stream, and
   * keeps it to send again right after every Hello: a control plane reached after a reconnect,
   * or restarted, knows nothing of this data plane's view until then. Without an open stream it
   * is only kept. While the stream cannot take more (a slow control plane), only the latest
   * report waits: each report replaces the whole view, so older ones are worth nothing.
   */
  sendHealth(nodes: readonly NodeHealth[]): void {
    if (this.#stopped) return;
    if (this.#healthEncoding === 0 && nodes.length <= HEALTH_NODES_PER_TURN) {
      this.#setHealth(this.#healthEncoder.encode(nodes));
      return;
    }
    // A big view (20,000 nodes) is encoded over several event-loop turns. Reports still go in
    // the order given, none dropped here: the control plane journals each state it sees.
    this.#healthEncoding += 1;
    this.#healthQueue = this.#healthQueue.then(async () => {
      const bytes = await this.#healthEncoder.encodeInTurns(nodes);
      this.#healthEncoding -= 1;
      if (!this.#stopped) this.#setHealth(bytes);
    });
  }

  /**
   * The node-health view changed (`held`: see HealthReportPacer): reports it on the open stream
   * from the `health` source, as that stream takes reports. Without a stream nothing is sent:
   * the next Hello is followed by the whole view.
   */
  reportHealth(held?: HealthChange): void {
    if (this.#stopped) return;
    const attempt = this.#attempt;
    if (attempt !== undefined && !attempt.ended) attempt.health?.request(held);
  }

  /**
   * True while the open stream carries changes-only health reports: every transition reaches
   * the control plane, none skipped, however reports are paced.
   */
  healthChangesOnly(): boolean {
    const attempt = this.#attempt;
    return attempt !== undefined && !attempt.ended && attempt.health?.changesOnly === true;
  }

  #setHealth(bytes: Uint8Array): void {
    this.#health = bytes;
    const attempt = this.#attempt;
    if (attempt !== undefined && !attempt.ended) this.#writeHealth(attempt);
  }

  /**
   * Sends the request outcomes per version (cumulative counts) on the open stream; without one,
   * or while the stream cannot take more, the report is dropped: the next carries the totals.
   */
  sendOutcomes(versions: readonly VersionOutcomeInit[]): void {
    const attempt = this.#attempt;
    if (this.#stopped || attempt === undefined || attempt.ended || attempt.healthBlocked) return;
    this.#write(attempt, { case: "outcomes", value: { versions: [...versions] } });
  }

  /**
   * Sends the breakers that are not closed (state of the world) on the open stream, and keeps
   * them to send again right after every Hello, as the health report is: a control plane
   * reached after a reconnect knows nothing of this data plane's breakers until then. Small
   * and paced (one a second at most), so it is written even when the stream is busy.
   */
  sendBreakers(breakers: readonly BreakerStateInit[]): void {
    if (this.#stopped) return;
    this.#breakers = [...breakers];
    const attempt = this.#attempt;
    if (attempt !== undefined && !attempt.ended) this.#writeBreakers(attempt);
  }

  #writeBreakers(attempt: Attempt): void {
    const breakers = this.#breakers;
    if (breakers === undefined) return;
    this.#write(attempt, { case: "breakers", value: { breakers } });
  }

  /**
   * Sends fleet-wide quota consumption (and asks for shares) on the open stream. False when no
   * stream is open: nothing was sent, and the caller counts alone meanwhile.
   */
  sendQuotaUsage(entries: readonly ConsumptionInit[]): boolean {
    return this.#sendNow({ case: "quotaUsage", value: { entries: [...entries] } });
  }

  /** Claims or releases an upstream's half-open probe; false when no stream is open. */
  sendProbeClaim(claim: ProbeClaimInit): boolean {
    return this.#sendNow({ case: "probeClaim", value: claim });
  }

  #sendNow(message: RequestInit["message"]): boolean {
    const attempt = this.#attempt;
    if (this.#stopped || attempt === undefined || attempt.ended) return false;
    if (this.#state.status !== "connected") return false;
    this.#write(attempt, message);
    return true;
  }

  #writeHealth(attempt: Attempt): void {
    const report = this.#health;
    if (report === undefined) return;
    if (attempt.healthBlocked) {
      attempt.healthPending = true;
      return;
    }
    if (attempt.call.write(report)) return;
    attempt.healthBlocked = true;
    attempt.call.once("drain", () => {
      attempt.healthBlocked = false;
      if (!attempt.healthPending || attempt.ended || this.#stopped) return;
      attempt.healthPending = false;
      this.#writeHealth(attempt);
    });
  }

  #connect(): void {
    const { addresses, channelOptions, connectTimeoutMs = 5_000 } = this.#options;
    const address = addresses[this.#index % addresses.length]!;
    this.#setState({ status: "connecting", address });
    const method = snapshotServiceDefinition.streamSnapshots;
    const client = new grpc.Client(address, this.#security.credentials, {
      ...DEFAULT_CHANNEL_OPTIONS,
      ...this.#security.channelOptions,
      ...channelOptions,
    });
    const call = client.makeBidiStreamRequest(
      method.path,
      method.requestSerialize,
      (bytes: Buffer) => bytes,
    );
    let markClosed = () => {};
    const closed = new Promise<void>((resolve) => {
      markClosed = resolve;
    });
    const source = this.#options.health;
    const health =
      source &&
      new HealthStream({
        source,
        encoder: this.#healthEncoder,
        write: (bytes) => call.write(bytes),
        onceDrain: (listener) => call.once("drain", listener),
        onError: (err) =>
          this.#options.logger.error({ err }, "could not build a node-health report"),
      });
    const attempt: Attempt = {
      address,
      client,
      call,
      delivered: false,
      timedOut: false,
      ended: false,
      decoding: undefined,
      healthBlocked: false,
      healthPending: false,
      queue: [],
      applying: false,
      parts: new SnapshotParts(),
      health,
      closed,
      markClosed,
    };
    this.#attempt = attempt;

    client.waitForReady(Date.now() + connectTimeoutMs, (err) => {
      if (attempt.ended || this.#stopped) return;
      if (err) {
        attempt.timedOut = true;
        call.cancel();
        return;
      }
      this.#setState({ status: "connected", address });
    });
    call.on("data", (bytes: Buffer) => this.#onBytes(attempt, bytes));
    // Response headers: whether this control plane takes changes-only health reports. A control
    // plane older than them sends its headers with its first message, without the header.
    call.on("metadata", (metadata: grpc.Metadata) => {
      if (attempt.ended || this.#stopped || attempt.health === undefined) return;
      const takesChanges = metadata.get(HEALTH_CHANGES_HEADER)[0]?.toString() === "1";
      this.#options.logger.info(
        { controlPlane: attempt.address, healthReports: takesChanges ? "changes-only" : "whole" },
        "node-health reports on this stream: after the whole view, as the control plane takes them",
      );
      attempt.health.headers(takesChanges);
    });
    // Every end, clean or not, arrives as one status event; errors carry nothing more.
    call.on("error", () => {});
    call.on("status", (status: grpc.StatusObject) => this.#onStreamEnd(attempt, status));

    call.write(
      create(StreamSnapshotsRequestSchema, {
        message: {
          case: "hello",
          value: {
            nodeId: this.#options.nodeId,
            hostname: this.#options.hostname,
            softwareVersion: this.#options.softwareVersion,
            protocolVersion: PROTOCOL_VERSION,
            lastAppliedVersion: BigInt(this.#options.lastAppliedVersion()),
            acceptsDeltas: this.#options.applyDelta !== undefined,
          },
        },
      }),
    );
    this.#writeHealth(attempt);
    health?.start();
    this.#writeBreakers(attempt);
  }

  /**
   * Decodes one message, in arrival order: a small one (a delta, an ACK-sized change) at once,
   * a big one (a whole config) across event-loop turns, with any message behind it waiting.
   * Bytes that do not decode end the stream, as grpc-js's own deserializer would.
   */
  #onBytes(attempt: Attempt, bytes: Buffer): void {
    if (attempt.ended || this.#stopped) return;
    if (attempt.decoding === undefined && bytes.length <= DECODE_AT_ONCE_BYTES) {
      let response: StreamSnapshotsResponse;
      try {
        response = fromBinary(StreamSnapshotsResponseSchema, bytes);
      } catch (err) {
        this.#undecodable(attempt, err);
        return;
      }
      this.#onResponse(attempt, response);
      return;
    }
    const decoding: Promise<void> = (attempt.decoding ?? Promise.resolve())
      .then(() => (attempt.ended || this.#stopped ? undefined : decodeResponse(bytes)))
      .then(
        (response) => response && this.#onResponse(attempt, response),
        (err: unknown) => this.#undecodable(attempt, err),
      )
      .finally(() => {
        if (attempt.decoding === decoding) attempt.decoding = undefined;
      });
    attempt.decoding = decoding;
  }

  #undecodable(attempt: Attempt, err: unknown): void {
    if (attempt.ended || this.#stopped) return;
    this.#options.logger.error(
      { controlPlane: attempt.address, err: { message: (err as Error).message } },
      "snapshot stream message does not decode; reconnecting",
    );
    attempt.call.cancel();
  }

  #onResponse(attempt: Attempt, response: StreamSnapshotsResponse): void {
    if (attempt.ended || this.#stopped) return;
    const message = response.message;
    if (message.case === "delta") {
      attempt.delivered = true;
      attempt.queue.push({ kind: "delta", delta: message.value });
    } else if (message.case === "snapshot") {
      attempt.delivered = true;
      const part = attempt.parts.add(message.value);
      if (part.status === "waiting" || part.status === "stale") return;
      if (part.status === "refused") {
        const { version, nonce } = message.value;
        this.#answer(attempt, version, nonce, { ok: false, reason: part.reason });
        return;
      }
      attempt.queue.push({ kind: "snapshot", snapshot: part.snapshot });
    } else if (message.case === "quotaGrant") {
      this.#options.onQuotaGrant?.(message.value);
      return;
    } else if (message.case === "probeVerdict") {
      this.#options.onProbeVerdict?.(message.value);
      return;
    } else {
      return;
    }
    if (!attempt.applying) void this.#applyQueue(attempt);
  }

  /**
   * Applies what arrived, one at a time and in order: a delta is built on the version served,
   * so it must wait for the snapshot before it. A whole snapshot with a newer one queued behind
   * it is skipped, and one being compiled is abandoned when a newer one arrives.
   */
  async #applyQueue(attempt: Attempt): Promise<void> {
    attempt.applying = true;
    try {
      while (attempt.queue.length > 0 && !attempt.ended && !this.#stopped) {
        const update = attempt.queue.shift()!;
        if (update.kind === "delta") {
          const pending = this.#applyDelta(attempt, update.delta);
          if (pending !== undefined) await pending;
          continue;
        }
        const superseded = () =>
          attempt.ended || this.#stopped || attempt.queue.some((u) => u.kind === "snapshot");
        if (superseded()) continue;
        const { version, nonce } = update.snapshot;
        const startedAt = this.#now();
        const result = await this.#applySafely(() =>
          this.#options.apply(update.snapshot, superseded),
        );
        if (result === undefined || attempt.ended) continue;
        this.#answer(attempt, version, nonce, result, this.#now() - startedAt);
      }
    } finally {
      attempt.applying = false;
    }
  }

  /** Applies a delta and answers it; a promise while an asynchronous apply is under way. */
  #applyDelta(attempt: Attempt, delta: SnapshotDelta): Promise<void> | undefined {
    const { version, nonce, baseVersion } = delta;
    const served = this.#options.lastAppliedVersion();
    const applyDelta = this.#options.applyDelta;
    if (applyDelta === undefined || baseVersion !== BigInt(served) || served === 0) {
      // Nothing is wrong with the version: this data plane is elsewhere (behind, ahead after a
      // reconnect, or it never said it takes deltas). It asks for the whole snapshot instead.
      const reason = `delta ${version} is on version ${baseVersion}; this data plane serves ${served}`;
      this.#options.logger.info(
        {
          version: Number(version),
          baseVersion: Number(baseVersion),
          served,
          controlPlane: attempt.address,
        },
        "delta not on the version served; asking for the whole snapshot",
      );
      this.#write(attempt, {
        case: "nack",
        value: { version, nonce, errorDetail: reason, wantsFullSnapshot: true },
      });
      return undefined;
    }
    const startedAt = this.#now();
    const result = this.#applySafelySync(() => applyDelta(delta));
    if (!(result instanceof Promise)) {
      if (result !== undefined)
        this.#answer(attempt, version, nonce, result, this.#now() - startedAt);
      return undefined;
    }
    return this.#applySafely(() => result).then((settled) => {
      if (settled !== undefined && !attempt.ended) {
        this.#answer(attempt, version, nonce, settled, this.#now() - startedAt);
      }
    });
  }

  /**
   * ACKs or NACKs `version`. `applyMs` is how long the apply ran, from its start to its end
   * (for a delta applied in one turn, the time it held the event loop); logged with the ACK, so
   * an SRE sees what each change cost this data plane.
   */
  #answer(
    attempt: Attempt,
    version: bigint,
    nonce: string,
    result: ApplyResult,
    applyMs?: number,
  ): void {
    const log = this.#options.logger;
    if (result.ok) {
      log.info(
        {
          version: Number(version),
          controlPlane: attempt.address,
          ...(applyMs === undefined ? {} : { applyMs: Math.round(applyMs * 100) / 100 }),
        },
        "snapshot applied",
      );
      this.#write(attempt, { case: "ack", value: { version, nonce } });
      return;
    }
    log.warn(
      { version: Number(version), controlPlane: attempt.address, reason: result.reason },
      "snapshot refused (NACK); still serving the last good snapshot",
    );
    this.#write(attempt, { case: "nack", value: { version, nonce, errorDetail: result.reason } });
  }

  #write(attempt: Attempt, message: RequestInit["message"]): void {
    if (attempt.ended) return;
    attempt.call.write(create(StreamSnapshotsRequestSchema, { message }));
  }

  async #applySafely(apply: () => SnapshotApplyResult | Promise<SnapshotApplyResult>) {
    try {
      return await apply();
    } catch (err) {
      return applyFailed(err);
    }
  }

  #applySafelySync(
    apply: () => SnapshotApplyResult | Promise<SnapshotApplyResult>,
  ): SnapshotApplyResult | Promise<SnapshotApplyResult> {
    try {
      return apply();
    } catch (err) {
      return applyFailed(err);
    }
  }

  #onStreamEnd(attempt: Attempt, status: grpc.StatusObject): void {
    if (attempt.ended) return;
    attempt.ended = true;
    attempt.health?.close();
    attempt.client.close();
    attempt.markClosed();
    if (this.#attempt === attempt) this.#attempt = undefined;
    if (this.#stopped) return;

    const { addresses, logger, connectTimeoutMs = 5_000 } = this.#options;
    this.#index = (this.#index + 1) % addresses.length;
    const nextAddress = addresses[this.#index]!;
    if (attempt.delivered) this.#backoff.reset();

    let retryInMs: number;
    let reason: string;
    if (status.code === grpc.status.FAILED_PRECONDITION) {
      // Retrying fast cannot help until one side is upgraded; keep trying, slowly.
      retryInMs = this.#backoff.maxMs;
      const theirs = status.metadata.get(PROTOCOL_VERSION_TRAILER)[0]?.toString() ?? "unknown";
      reason = `incompatible protocol: data plane speaks protocol ${PROTOCOL_VERSION}, control plane ${attempt.address} speaks ${theirs} (${status.details})`;
      logger.error(
        {
          controlPlane: attempt.address,
          dataPlaneProtocolVersion: PROTOCOL_VERSION,
          controlPlaneProtocolVersion: theirs,
          detail: status.details,
          retryInMs,
        },
        reason,
      );
    } else {
      retryInMs = this.#backoff.next();
      reason = attempt.timedOut
        ? `no connection within ${connectTimeoutMs} ms`
        : `${grpc.status[status.code] ?? status.code}: ${status.details}`;
      logger.warn(
        { controlPlane: attempt.address, reason, nextAddress, retryInMs },
        "snapshot stream ended; reconnecting",
      );
    }
    this.#setState({ status: "waiting", nextAddress, retryInMs, reason });
    this.#retryTimer = setTimeout(() => this.#connect(), retryInMs);
  }

  #setState(state: ConnectionState): void {
    this.#state = state;
    for (const listener of this.#listeners) listener(state);
  }
}

// A throwing apply is a bug, but the stream must still answer and keep serving.
function applyFailed(err: unknown): ApplyResult {
  return { ok: false, reason: `apply failed: ${err instanceof Error ? err.message : err}` };
}
