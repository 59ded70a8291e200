import {
  type Ack,
  create,
  type EncodedOrResponse,
  encodeResponse,
  type Hello,
  type Nack,
  PROTOCOL_VERSION,
  type StreamSnapshotsRequest,
  StreamSnapshotsResponseSchema,
} from "@clawgate/proto";
import { type ServerDuplexStream, type ServiceError, status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { Fleet, StreamToken } from "../fleet/fleet.js";
import type { PublishedSnapshot, SnapshotBuilder } from "../snapshot/snapshot-builder.js";
import { checkAnswer, checkHealthReport, checkHello } from "./request-bounds.js";
import { serviceError } from "./service-error.js";

export interface StreamSessionOptions {
  call: ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse>;
  builder: Pick<SnapshotBuilder, "current" | "onPublish">;
  fleet: Fleet;
  logger: Pick<Logger, "debug" | "info" | "warn" | "error">;
  metrics?: { recordNack(): void; recordSent?(bytes: number): void } | undefined;
  /** Called once when the stream is over, however it ended. */
  onClosed(): void;
  /** A stream without a Hello this long is ended, freeing its grpcMaxStreams slot. */
  helloTimeoutMs: number;
}

interface Identity {
  nodeId: string;
  stream: StreamToken;
}

/**
 * One data plane's stream: waits for Hello, then sends each published snapshot that differs
 * from what the data plane applied and that it has not refused, and records its answers.
 */
export class StreamSession {
  private readonly call: StreamSessionOptions["call"];
  private readonly builder: StreamSessionOptions["builder"];
  private readonly fleet: Fleet;
  private readonly logger: StreamSessionOptions["logger"];
  private readonly metrics: StreamSessionOptions["metrics"];
  private readonly onClosed: () => void;

  private identity: Identity | undefined;
  private applied = 0;
  /** Newest version written on this stream. */
  private lastSent: number | undefined;
  /** Versions sent and not yet answered, by nonce. */
  private readonly outstanding = new Map<string, number>();
  /** The transport buffer is full; the newest snapshot goes out on 'drain'. */
  private blocked = false;
  private unsubscribe: (() => void) | undefined;
  private closed = false;
  private helloTimer: NodeJS.Timeout | undefined;

  constructor(options: StreamSessionOptions) {
    this.call = options.call;
    this.builder = options.builder;
    this.fleet = options.fleet;
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.onClosed = options.onClosed;
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
    this.call.on("data", (request: StreamSnapshotsRequest) => this.onRequest(request));
    // The data plane half-closed: it wants no more snapshots.
    this.call.on("end", () => {
      if (this.closed) return;
      this.cleanup("data plane ended the stream");
      this.call.end();
    });
    this.call.on("cancelled", () => this.cleanup("stream cancelled"));
    this.call.on("close", () => this.cleanup("stream closed"));
    this.call.on("error", (error: Error) => this.cleanup(`stream failed: ${error.message}`));
    this.call.on("drain", () => {
      this.blocked = false;
      this.offer(this.builder.current());
    });
  }

  /** Ends the stream with `error` as its status. */
  fail(error: ServiceError): void {
    if (this.closed) return;
    this.cleanup(`ended by the control plane: ${error.details}`);
    // grpc-js turns an 'error' emitted on a server stream into the call's final status.
    this.call.emit("error", error);
  }

  private onRequest(request: StreamSnapshotsRequest): void {
    if (this.closed) return;
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
      case "health": {
        const nodes = checkHealthReport(message.value.nodes);
        // State of the world: the report replaces whatever this data plane said before.
        if (nodes.ok)
          this.fleet.healthReported(this.identity.nodeId, this.identity.stream, nodes.value);
        else this.refuse(nodes.reason);
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
    this.identity = { nodeId: hello.nodeId, stream: this.fleet.connected(hello.nodeId, hello) };
    this.logger.info(
      {
        nodeId: hello.nodeId,
        hostname: hello.hostname,
        softwareVersion: hello.softwareVersion,
        lastAppliedVersion: this.applied,
        peer: this.peer(),
      },
      "data plane connected",
    );
    this.unsubscribe = this.builder.onPublish((published) => this.offer(published));
    this.offer(this.builder.current());
  }

  private onAck(identity: Identity, ack: Ack): void {
    const version = this.answered(identity, ack, "Ack");
    if (version === undefined) return;
    this.applied = version;
    this.fleet.acked(identity.nodeId, version);
    this.logger.debug({ nodeId: identity.nodeId, version }, "data plane applied snapshot");
  }

  private onNack(identity: Identity, nack: Nack): void {
    const version = this.answered(identity, nack, "Nack");
    if (version === undefined) return;
    this.fleet.nacked(identity.nodeId, version, nack.errorDetail);
    this.metrics?.recordNack();
    this.logger.warn(
      { nodeId: identity.nodeId, version, error: nack.errorDetail },
      "data plane refused snapshot; it keeps serving its last good one",
    );
  }

  /** The version an Ack or Nack answers, or undefined when it answers nothing sent here. */
  private answered(identity: Identity, answer: Ack | Nack, kind: string): number | undefined {
    const version = this.outstanding.get(answer.nonce);
    if (version === undefined || BigInt(version) !== answer.version) {
      this.logger.warn(
        { nodeId: identity.nodeId, nonce: answer.nonce, version: Number(answer.version) },
        `ignoring ${kind} whose nonce does not match a snapshot sent on this stream`,
      );
      return undefined;
    }
    // Answers come in order, so older sends will never be answered now.
    for (const [nonce, sent] of this.outstanding) {
      if (sent <= version) this.outstanding.delete(nonce);
    }
    return version;
  }

  private offer(published: PublishedSnapshot | undefined): void {
    const identity = this.identity;
    if (published === undefined || identity === undefined || this.closed || this.blocked) return;
    const { version } = published;
    if (version === this.applied || version === this.lastSent) return;
    // A refused version is never sent again: the data plane would only refuse it again.
    if (this.fleet.refused(identity.nodeId, version)) return;
    this.lastSent = version;
    this.outstanding.set(published.nonce, version);
    this.logger.debug({ nodeId: identity.nodeId, version }, "sending snapshot");
    // The shared bytes go out as they are; responseSerialize passes a Uint8Array through.
    const encoded = encodedOnce(published);
    this.metrics?.recordSent?.(encoded.byteLength);
    if (!this.call.write(encoded)) this.blocked = true;
  }

  private cleanup(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.helloTimer);
    this.unsubscribe?.();
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

/**
 * Stopgap until the snapshot server encodes deltas and parts itself: the builder no longer
 * encodes, so each published snapshot is encoded here once and its bytes shared by every stream.
 */
const encodings = new WeakMap<PublishedSnapshot, Uint8Array>();
function encodedOnce(published: PublishedSnapshot): Uint8Array {
  let encoded = encodings.get(published);
  if (encoded === undefined) {
    encoded = encodeResponse(
      create(StreamSnapshotsResponseSchema, {
        message: { case: "snapshot", value: published.snapshot },
      }),
    );
    encodings.set(published, encoded);
  }
  return encoded;
}
