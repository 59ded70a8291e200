import {
  AckSchema,
  create,
  HEALTH_CHANGES_HEADER,
  HelloSchema,
  NackSchema,
  NodeHealthReportSchema,
  NodeHealthSchema,
  OutcomeReportSchema,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_TRAILER,
  type Snapshot,
  type SnapshotDelta,
  SnapshotSchema,
  STREAM_LIMITS,
  type StreamSnapshotsRequest,
  StreamSnapshotsRequestSchema,
  type StreamSnapshotsResponse,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { DataPlaneState } from "../fleet/data-plane-view.js";
import { Fleet } from "../fleet/fleet.js";
import { FleetHealth } from "../health/fleet-health.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
import { FakeSnapshotPublisher } from "../testing/fake-snapshot-publisher.js";
import { type EncodingKind, SNAPSHOT_PART_BYTES, SnapshotEncodings } from "./snapshot-encodings.js";
import {
  MAX_RECEIVE_MESSAGE_BYTES,
  type SnapshotServer,
  type SnapshotServerOptions,
  startSnapshotServer,
} from "./snapshot-server.js";
import type { VersionTargets } from "./stream-session.js";

const method = snapshotServiceDefinition.streamSnapshots;

/** What a data plane got: a whole snapshot (its parts put together) or a delta. */
type Received =
  | { kind: "full"; version: bigint; nonce: string; snapshot: Snapshot; messageBytes: number[] }
  | { kind: "delta"; version: bigint; nonce: string; delta: SnapshotDelta };

/** A data plane's end of the stream, driven by the test. */
class TestDataPlane {
  readonly call: grpc.ClientDuplexStream<
    StreamSnapshotsRequest,
    { bytes: number; response: StreamSnapshotsResponse }
  >;
  readonly status: Promise<grpc.StatusObject>;
  private readonly received: Received[] = [];
  private waiter: ((received: Received) => void) | undefined;
  /** Parts of a snapshot still arriving, with their sizes. */
  private parts: Array<{ bytes: number; snapshot: Snapshot }> = [];

  constructor(client: grpc.Client) {
    this.call = client.makeBidiStreamRequest(method.path, method.requestSerialize, (bytes) => ({
      bytes: bytes.length,
      response: method.responseDeserialize(bytes),
    }));
    this.status = new Promise((resolve) => this.call.on("status", resolve));
    // A non-OK status also arrives as 'error'; the test reads it from `status`.
    this.call.on("error", () => undefined);
    this.call.on("data", ({ bytes, response }) => {
      const message = response.message;
      if (message.case === "delta") {
        const { version, nonce } = message.value;
        this.deliver({ kind: "delta", version, nonce, delta: message.value });
      } else if (message.case === "snapshot") {
        this.part(bytes, message.value);
      }
    });
  }

  /** Puts the parts of a snapshot back together, as a data plane does before applying it. */
  private part(bytes: number, snapshot: Snapshot): void {
    this.parts.push({ bytes, snapshot });
    if (this.parts.length < Math.max(1, snapshot.parts)) return;
    const parts = this.parts;
    this.parts = [];
    const { version, nonce, createdAtMs } = snapshot;
    for (const [index, { snapshot: part }] of parts.entries()) {
      expect(part).toMatchObject({ version, nonce, createdAtMs, part: index });
    }
    const whole = create(SnapshotSchema, {
      version,
      nonce,
      createdAtMs,
      routes: parts.flatMap((p) => p.snapshot.routes),
      upstreams: parts.flatMap((p) => p.snapshot.upstreams),
      breakers: parts.flatMap((p) => p.snapshot.breakers),
      tenants: parts.flatMap((p) => p.snapshot.tenants),
    });
    const messageBytes = parts.map((p) => p.bytes);
    this.deliver({ kind: "full", version, nonce, snapshot: whole, messageBytes });
  }

  private deliver(received: Received): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter) waiter(received);
    else this.received.push(received);
  }

  hello(
    nodeId: string,
    lastAppliedVersion = 0,
    { protocolVersion = PROTOCOL_VERSION, acceptsDeltas = true } = {},
  ): void {
    this.send({
      case: "hello",
      value: create(HelloSchema, {
        nodeId,
        hostname: `${nodeId}.local`,
        softwareVersion: "1.0.0",
        protocolVersion,
        lastAppliedVersion: BigInt(lastAppliedVersion),
        acceptsDeltas,
      }),
    });
  }

  ack(received: Pick<Received, "version" | "nonce">, nonce = received.nonce): void {
    this.send({ case: "ack", value: create(AckSchema, { version: received.version, nonce }) });
  }

  nack(received: Received, errorDetail: string, wantsFullSnapshot = false): void {
    this.send({
      case: "nack",
      value: create(NackSchema, {
        version: received.version,
        nonce: received.nonce,
        errorDetail,
        wantsFullSnapshot,
      }),
    });
  }

  send(message: StreamSnapshotsRequest["message"]): void {
    this.call.write(create(StreamSnapshotsRequestSchema, { message }));
  }

  next(): Promise<Received> {
    const queued = this.received.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /** The next arrival, which must be a whole snapshot. */
  async nextFull(): Promise<Extract<Received, { kind: "full" }>> {
    const received = await this.next();
    if (received.kind !== "full")
      throw new Error(`expected a whole snapshot, got a ${received.kind}`);
    return received;
  }

  /** The next arrival, which must be a delta. */
  async nextDelta(): Promise<Extract<Received, { kind: "delta" }>> {
    const received = await this.next();
    if (received.kind !== "delta") throw new Error(`expected a delta, got a ${received.kind}`);
    return received;
  }

  /** Snapshots received and not yet taken with next(). */
  pending(): number {
    return this.received.length;
  }
}

interface Harness {
  publisher: FakeSnapshotPublisher;
  encodings: SnapshotEncodings;
  /** Every encode the server's encodings did, in order. */
  encodes: Array<{ kind: EncodingKind | "whole"; version: number }>;
  fleet: Fleet;
  server: SnapshotServer;
  client: grpc.Client;
  /** A client on a connection of its own, closed after the test. */
  connect(): grpc.Client;
  logs: Array<{ level: number; msg: string; nodeId?: string }>;
  nacks: number;
  /** Bytes the server counted as sent on streams. */
  bytesSent: number;
  /** Snapshots the server counted as sent, by kind. */
  sends: Record<EncodingKind, number>;
  /** Publishes a change to upstream `name` and returns the version it got. */
  change(name: string): number;
  waitForState(nodeId: string, state: DataPlaneState): Promise<void>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function harness(
  limits: {
    maxStreams?: number;
    maxReceiveMessageBytes?: number;
    helloTimeoutMs?: number;
    targets?: VersionTargets;
    outcomes?: SnapshotServerOptions["outcomes"];
  } = {},
): Promise<Harness> {
  const logs: Harness["logs"] = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const publisher = new FakeSnapshotPublisher();
  publisher.publish({ put: [{ name: "first" }] });
  const encodes: Harness["encodes"] = [];
  const encodings = new SnapshotEncodings({
    onEncode: (kind, version) => encodes.push({ kind, version }),
  });
  const fleet = new Fleet();
  const h: Partial<Harness> = {
    publisher,
    encodings,
    encodes,
    fleet,
    logs,
    nacks: 0,
    bytesSent: 0,
    sends: { full: 0, delta: 0 },
  };
  const server = await startSnapshotServer({
    address: "127.0.0.1:0",
    builder: publisher,
    encodings,
    fleet,
    logger,
    metrics: {
      recordNack: () => h.nacks!++,
      recordSent: (bytes) => {
        h.bytesSent! += bytes;
      },
      recordSend: (kind) => h.sends![kind]++,
    },
    ...limits,
  });
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  cleanups.push(async () => {
    client.close();
    await server.close(1_000);
  });
  return Object.assign(h, {
    server,
    client,
    connect() {
      const own = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure(), {
        "grpc.use_local_subchannel_pool": 1,
      });
      cleanups.push(async () => own.close());
      return own;
    },
    change(name: string) {
      return publisher.publish({ put: [{ name, nodes: 2 }] }).version;
    },
    waitForState(nodeId: string, state: DataPlaneState) {
      return new Promise<void>((resolve) => {
        const check = () => {
          if (fleet.get(nodeId)?.state !== state) return false;
          off();
          resolve();
          return true;
        };
        const off = fleet.onChange(check);
        check();
      });
    },
  }) as Harness;
}

describe("snapshot server", () => {
  it("hands each OutcomeReport to the sink, and ends a stream whose report lists too many versions", async () => {
    const reports: unknown[] = [];
    const h = await harness({ outcomes: (nodeId, versions) => reports.push({ nodeId, versions }) });
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    dp.ack(await dp.nextFull());
    const outcome = (version: number) => ({ version: BigInt(version), requests: 5n, failures: 2n });
    dp.send({ case: "outcomes", value: create(OutcomeReportSchema, { versions: [outcome(1)] }) });
    const many = Array.from({ length: 17 }, (_, i) => outcome(i + 1));
    dp.send({ case: "outcomes", value: create(OutcomeReportSchema, { versions: many }) });
    const status = await dp.status;
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toBe("OutcomeReport lists 17 versions; at most 16");
    expect(reports).toEqual([
      { nodeId: "dp-1", versions: [{ version: 1, requests: 5, failures: 2 }] },
    ]);
  });

  it("keeps a pinned data plane on its version (canaries still get deltas), then sends it the newest once unpinned", async () => {
    let pin: ReturnType<VersionTargets["pinned"]>;
    const listeners = new Set<() => void>();
    const h = await harness({
      targets: {
        pinned: (nodeId) => (nodeId === "dp-rest" ? pin : undefined),
        onChange: (listener) => {
          listeners.add(listener);
          return () => listeners.delete(listener);
        },
      },
    });
    const base = h.publisher.current()!;
    pin = base;
    const canary = new TestDataPlane(h.client);
    canary.hello("dp-canary");
    const rest = new TestDataPlane(h.connect());
    rest.hello("dp-rest");
    canary.ack(await canary.nextFull());
    const restFirst = await rest.nextFull();
    expect(restFirst.version).toBe(BigInt(base.version));
    rest.ack(restFirst);

    const next = h.change("second");
    expect((await canary.nextDelta()).version).toBe(BigInt(next));
    // Streams are offered a publish in the same turn: only the canary's was sent.
    expect(h.sends.delta).toBe(1);

    pin = "hold";
    const newest = h.change("third");
    expect((await canary.nextDelta()).version).toBe(BigInt(newest));
    expect(h.sends.delta).toBe(2);

    pin = undefined;
    for (const listener of listeners) listener();
    const caughtUp = await rest.nextFull();
    expect(caughtUp.version).toBe(BigInt(newest));
    expect(rest.pending()).toBe(0);
  });

  it("answers Hello with the published snapshot and records the Ack", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");

    const snapshot = await dp.nextFull();
    const published = h.publisher.current()!;
    expect(snapshot.version).toBe(BigInt(published.version));
    expect(snapshot.nonce).toBe(`cp-${published.version}`);
    expect(snapshot.snapshot.upstreams.map((u) => u.name)).toEqual(["first"]);
    expect(h.fleet.get("dp-1")?.state).toBe("SYNCING");

    dp.ack(snapshot);
    await h.waitForState("dp-1", "SYNCED");
    expect(h.fleet.get("dp-1")).toMatchObject({
      appliedVersion: published.version,
      publishedVersion: published.version,
      connected: true,
      hostname: "dp-1.local",
    });

    // Every later publish goes out too.
    const next = h.change("second");
    expect((await dp.next()).version).toBe(BigInt(next));
  });

  it("sends nothing to a data plane that already applied the published version", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1", h.publisher.current()!.version);
    await h.waitForState("dp-1", "SYNCED");

    const next = h.change("second");
    // The first snapshot on this stream is the new version, not the one it already had.
    expect((await dp.next()).version).toBe(BigInt(next));
    expect(dp.pending()).toBe(0);
  });

  it("records a Nack, never resends that version, and sends the next one", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    const refused = await dp.next();
    dp.nack(refused, "upstream first: cannot resolve");
    await h.waitForState("dp-1", "NACKED");
    expect(h.fleet.get("dp-1")?.lastNack).toMatchObject({
      version: Number(refused.version),
      error: "upstream first: cannot resolve",
    });
    expect(h.nacks).toBe(1);

    // Reconnecting does not earn the refused version another send either.
    dp.call.end();
    await dp.status;
    const again = new TestDataPlane(h.client);
    again.hello("dp-1");
    await h.waitForState("dp-1", "NACKED");

    const next = h.change("second");
    const sent = await again.next();
    expect(sent.version).toBe(BigInt(next));
    expect(sent.version).not.toBe(refused.version);
    again.ack(sent);
    await h.waitForState("dp-1", "SYNCED");
  });

  it("ignores an Ack whose nonce was not sent", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    const snapshot = await dp.next();
    dp.ack(snapshot, "someone-else-1");
    dp.ack(snapshot);
    await h.waitForState("dp-1", "SYNCED");
    // Answers are handled in order, so the bogus one was seen (and dropped) first.
    expect(
      h.logs.some((line) => line.level === 40 && line.msg.includes("nonce does not match")),
    ).toBe(true);
  });

  it("refuses another protocol version with FAILED_PRECONDITION naming both", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-old", 0, { protocolVersion: PROTOCOL_VERSION + 1 });
    const status = await dp.status;
    expect(status.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(status.details).toContain(`protocol version ${PROTOCOL_VERSION + 1}`);
    expect(status.details).toContain(`speaks protocol version ${PROTOCOL_VERSION}`);
    // The trailer the data plane's client reads to log which protocol the CP speaks.
    expect(status.metadata.get(PROTOCOL_VERSION_TRAILER)).toEqual([String(PROTOCOL_VERSION)]);
    expect(h.fleet.get("dp-old")).toBeUndefined();
  });

  it("refuses a stream that does not start with Hello", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.send({ case: "ack", value: create(AckSchema, { version: 1n, nonce: "x" }) });
    const status = await dp.status;
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toContain("Hello");
  });

  it("marks a data plane DISCONNECTED when its stream goes away", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    await dp.next();
    dp.call.cancel();
    await h.waitForState("dp-1", "DISCONNECTED");
  });

  it("ends every stream with UNAVAILABLE when it closes", async () => {
    const h = await harness();
    const a = new TestDataPlane(h.client);
    const b = new TestDataPlane(h.client);
    a.hello("dp-a");
    b.hello("dp-b");
    await Promise.all([a.next(), b.next()]);

    await h.server.close(1_000);
    const [statusA, statusB] = await Promise.all([a.status, b.status]);
    expect(statusA.code).toBe(grpc.status.UNAVAILABLE);
    expect(statusB.code).toBe(grpc.status.UNAVAILABLE);
    expect(h.fleet.counts().DISCONNECTED).toBe(2);
  });

  it("counts the bytes of every snapshot it writes to a stream", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    const first = await dp.nextFull();
    const full = h.encodings.full(h.publisher.current()!)[0]!.byteLength;
    expect(h.bytesSent).toBe(full);
    dp.ack(first);

    h.change("second");
    await dp.nextDelta();
    const delta = h.encodings.delta(h.publisher.current()!)!.byteLength;
    expect(h.bytesSent).toBe(full + delta);
    expect(h.sends).toEqual({ full: 1, delta: 1 });
  });
});

describe("snapshot server sends deltas and parts", () => {
  it("sends the whole snapshot first, then each change as a delta on the version acknowledged", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    const first = await dp.nextFull();
    expect(first.messageBytes).toHaveLength(1);
    dp.ack(first);
    await h.waitForState("dp-1", "SYNCED");

    const version = h.change("second");
    const delta = await dp.nextDelta();
    expect(delta.version).toBe(BigInt(version));
    expect(delta.delta.baseVersion).toBe(first.version);
    expect(delta.delta).toEqual(h.publisher.current()!.delta);
    dp.ack(delta);
    await h.waitForState("dp-1", "SYNCED");
    expect(h.fleet.get("dp-1")?.appliedVersion).toBe(version);

    // A delta may follow one not yet acknowledged: the data plane applies them in order.
    const third = h.change("third");
    const fourth = h.change("fourth");
    expect((await dp.nextDelta()).delta.baseVersion).toBe(BigInt(version));
    expect((await dp.nextDelta()).delta.baseVersion).toBe(BigInt(third));
    expect(h.fleet.get("dp-1")?.publishedVersion).toBe(fourth);
    expect(h.sends).toEqual({ full: 1, delta: 3 });
  });

  it("sends a data plane that reconnects on another version than the delta's base the whole snapshot", async () => {
    const h = await harness();
    const base = h.publisher.current()!.version;
    h.change("second");
    const version = h.change("third");

    const behind = new TestDataPlane(h.client);
    behind.hello("dp-behind", base);
    const full = await behind.nextFull();
    expect(full.version).toBe(BigInt(version));
    expect(full.snapshot.upstreams.map((u) => u.name)).toEqual(["first", "second", "third"]);

    // One on exactly the delta's base gets the delta: versions are store revisions.
    const onBase = new TestDataPlane(h.client);
    onBase.hello("dp-on-base", version - 1);
    expect((await onBase.nextDelta()).version).toBe(BigInt(version));
  });

  it("answers a Nack asking for the whole snapshot with it, and records no refusal", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    dp.ack(await dp.nextFull());
    await h.waitForState("dp-1", "SYNCED");

    h.change("second");
    const delta = await dp.nextDelta();
    dp.nack(delta, "delta base 10 is not the version served (9)", true);
    const full = await dp.nextFull();
    expect(full.version).toBe(delta.version);
    expect(full.nonce).toBe(delta.nonce);
    expect(full.snapshot).toEqual(h.publisher.current()!.snapshot);
    expect(h.nacks).toBe(0);
    expect(h.fleet.get("dp-1")?.lastNack).toBeUndefined();
    dp.ack(full);
    await h.waitForState("dp-1", "SYNCED");

    // Deltas resume on the version the whole snapshot brought.
    h.change("third");
    expect((await dp.nextDelta()).delta.baseVersion).toBe(full.version);
  });

  it("never resends a delta's version it refused, whole or not, and sends the next one whole", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    dp.ack(await dp.nextFull());
    await h.waitForState("dp-1", "SYNCED");

    h.change("second");
    const refused = await dp.nextDelta();
    dp.nack(refused, "upstream second: cannot resolve");
    await h.waitForState("dp-1", "NACKED");
    expect(h.nacks).toBe(1);

    // Messages arrive in order: had the refused version gone again, it would come first.
    const next = h.change("third");
    const full = await dp.nextFull();
    expect(full.version).toBe(BigInt(next));
    expect(full.snapshot).toEqual(h.publisher.current()!.snapshot);
    expect(dp.pending()).toBe(0);
    dp.ack(full);
    await h.waitForState("dp-1", "SYNCED");
  });

  it("skips versions while a stream is blocked, then sends the newest, whole when the base is gone", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.connect());
    dp.hello("dp-1");
    const first = await dp.nextFull();
    dp.ack(first);
    await h.waitForState("dp-1", "SYNCED");

    // A data plane that stops reading: its buffers, the HTTP/2 window and the server's fill up
    // long before 60 changes of 200 KB each have been written.
    dp.call.pause();
    let last = 0;
    for (let i = 0; i < 60; i++) {
      last = h.publisher.publish({
        put: [{ name: `u${i}`, nodes: 200, addressLength: 1_000 }],
      }).version;
    }
    dp.call.resume();
    const received: Received[] = [first];
    while (received.at(-1)!.version !== BigInt(last)) received.push(await dp.next());

    expect(received.length).toBeLessThan(61);
    // Whatever was skipped, the data plane could apply every message in order: each delta is
    // on the version before it, and the newest came whole after the gap.
    for (const [i, message] of received.entries()) {
      if (message.kind === "delta")
        expect(message.delta.baseVersion).toBe(received[i - 1]!.version);
    }
    const newest = received.at(-1)!;
    expect(newest.kind).toBe("full");
    if (newest.kind === "full") expect(newest.snapshot).toEqual(h.publisher.current()!.snapshot);
  });

  it("encodes each version once and writes the same bytes to every stream", async () => {
    const h = await harness();
    const fullSpy = vi.spyOn(h.encodings, "full");
    const deltaSpy = vi.spyOn(h.encodings, "delta");
    // A connection carries at most 4 streams: each data plane gets its own, as in a fleet.
    const dps = Array.from({ length: 10 }, () => new TestDataPlane(h.connect()));
    for (const [i, dp] of dps.entries()) dp.hello(`dp-${i}`);
    const received = await Promise.all(dps.map((dp) => dp.nextFull()));
    for (const [i, dp] of dps.entries()) dp.ack(received[i]!);
    const first = h.publisher.current()!;
    await Promise.all(dps.map((_, i) => h.waitForState(`dp-${i}`, "SYNCED")));

    const version = h.change("second");
    await Promise.all(dps.map((dp) => dp.nextDelta()));

    const fulls = fullSpy.mock.results.map((result) => result.value);
    const deltas = deltaSpy.mock.results.map((result) => result.value);
    expect(fulls).toHaveLength(10);
    expect(deltas).toHaveLength(10);
    for (const bytes of fulls) expect(bytes).toBe(fulls[0]);
    for (const bytes of deltas) expect(bytes).toBe(deltas[0]);
    expect(h.encodes).toEqual([
      { kind: "full", version: first.version },
      { kind: "delta", version },
    ]);
    expect(h.bytesSent).toBe(10 * (fulls[0]![0]!.byteLength + deltas[0]!.byteLength));
  });

  it("sends a 30 MB snapshot in parts under the part size that make up the same snapshot", async () => {
    const h = await harness();
    const published = h.publisher.publish({
      put: Array.from({ length: 1_000 }, (_, i) => ({
        name: `big-${i}`,
        nodes: 30,
        addressLength: 1_000,
      })),
    });
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    const full = await dp.nextFull();
    const total = full.messageBytes.reduce((sum, bytes) => sum + bytes, 0);
    expect(total).toBeGreaterThan(30_000_000);
    expect(full.messageBytes.length).toBeGreaterThanOrEqual(30);
    for (const bytes of full.messageBytes) expect(bytes).toBeLessThanOrEqual(SNAPSHOT_PART_BYTES);
    expect(full.snapshot).toEqual(published.snapshot);
    // One send however many parts: a single Ack answers it.
    dp.ack(full);
    await h.waitForState("dp-1", "SYNCED");
    expect(h.sends).toEqual({ full: 1, delta: 0 });
  });

  it("sends a data plane older than deltas and parts only whole snapshots, each one message", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-old", 0, { acceptsDeltas: false });
    const first = await dp.nextFull();
    dp.ack(first);
    await h.waitForState("dp-old", "SYNCED");

    const version = h.change("second");
    const second = await dp.nextFull();
    expect(second.version).toBe(BigInt(version));
    expect(second.messageBytes).toHaveLength(1);
    expect(second.snapshot).toEqual(h.publisher.current()!.snapshot);
    dp.ack(second);

    // It would take a first part for the whole config: a big snapshot goes as one message too.
    const big = h.publisher.publish({
      put: Array.from({ length: 100 }, (_, i) => ({
        name: `big-${i}`,
        nodes: 20,
        addressLength: 1_000,
      })),
    });
    const third = await dp.nextFull();
    expect(third.messageBytes).toHaveLength(1);
    expect(third.messageBytes[0]).toBeGreaterThan(SNAPSHOT_PART_BYTES);
    expect(third.snapshot).toEqual(big.snapshot);
    expect(h.sends).toEqual({ full: 3, delta: 0 });
  });
});

describe("snapshot server bounds what a data plane may send", () => {
  function helloWith(dp: TestDataPlane, fields: { nodeId?: string; hostname?: string }): void {
    dp.send({
      case: "hello",
      value: create(HelloSchema, {
        nodeId: fields.nodeId ?? "dp-1",
        hostname: fields.hostname ?? "dp-1.local",
        softwareVersion: "1.0.0",
        protocolVersion: PROTOCOL_VERSION,
      }),
    });
  }

  it("refuses an oversize Hello with INVALID_ARGUMENT naming the field and keeps nothing", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    helloWith(dp, { hostname: "h".repeat(STREAM_LIMITS.hostnameLength + 1) });
    const status = await dp.status;
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toBe(
      `Hello.hostname is ${STREAM_LIMITS.hostnameLength + 1} characters long; the limit is ${STREAM_LIMITS.hostnameLength}`,
    );
    expect(h.fleet.list()).toEqual([]);
    // The refusal is logged without the value.
    expect(JSON.stringify(h.logs)).not.toContain("h".repeat(STREAM_LIMITS.hostnameLength));
  });

  it("refuses a Hello whose node id is too long", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    helloWith(dp, { nodeId: "n".repeat(10_000) });
    const status = await dp.status;
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toContain(`Hello.nodeId is 10000 characters long; the limit is 253`);
    expect(h.fleet.list()).toEqual([]);
  });

  it("refuses a message over the receive limit before decoding it", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    // Past the largest message a data plane may send at once.
    helloWith(dp, { hostname: "h".repeat(MAX_RECEIVE_MESSAGE_BYTES + 1) });
    const status = await dp.status;
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(h.fleet.list()).toEqual([]);
  });

  it("keeps and logs only the first part of a long Nack detail", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    const refused = await dp.next();
    dp.nack(refused, `bad upstream ${"x".repeat(100_000)}`);
    await h.waitForState("dp-1", "NACKED");
    const error = h.fleet.get("dp-1")!.lastNack!.error;
    expect(error.startsWith("bad upstream xxx")).toBe(true);
    expect(error).toContain("more characters cut");
    expect(error.length).toBeLessThan(STREAM_LIMITS.nackDetailLength + 50);
    const logged = h.logs.find((line) => line.msg.startsWith("data plane refused snapshot"));
    expect(JSON.stringify(logged).length).toBeLessThan(STREAM_LIMITS.nackDetailLength + 500);
  });

  it("ends the stream on an Ack whose nonce is over its bound", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    const snapshot = await dp.next();
    dp.ack(snapshot, "n".repeat(STREAM_LIMITS.nonceLength + 1));
    const status = await dp.status;
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toContain(`Ack.nonce is ${STREAM_LIMITS.nonceLength + 1} characters`);
    await h.waitForState("dp-1", "DISCONNECTED");
  });

  it("refuses a health report with too many nodes and cuts long evidence", async () => {
    const h = await harness();
    const reports: string[][] = [];
    h.fleet.onHealthReport((_, nodes) => reports.push(nodes.map((node) => node.evidence)));
    const node = (evidence: string) =>
      create(NodeHealthSchema, {
        upstream: "first",
        address: "127.0.0.1:1",
        state: "healthy",
        evidence,
      });

    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    await dp.next();
    dp.send({
      case: "health",
      value: create(NodeHealthReportSchema, { nodes: [node("e".repeat(5_000))] }),
    });
    const tooMany = Array.from({ length: STREAM_LIMITS.healthNodes + 1 }, () => node("ok"));
    dp.send({ case: "health", value: create(NodeHealthReportSchema, { nodes: tooMany }) });

    const status = await dp.status;
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toBe(
      `NodeHealthReport.nodes has ${STREAM_LIMITS.healthNodes + 1} entries; the limit is ${STREAM_LIMITS.healthNodes}`,
    );
    // Only the first report arrived, its evidence cut to the bound.
    expect(reports).toHaveLength(1);
    expect(reports[0]![0]!.startsWith("e".repeat(STREAM_LIMITS.healthEvidenceLength))).toBe(true);
    expect(reports[0]![0]!.length).toBeLessThan(STREAM_LIMITS.healthEvidenceLength + 50);
  });

  it("says in its response headers that it takes changes-only health reports, and applies them on the whole view", async () => {
    const h = await harness();
    const whole: string[][] = [];
    const changes: Array<{ nodes: string[]; removed: string[] }> = [];
    h.fleet.onHealthReport((_, nodes) => whole.push(nodes.map((n) => `${n.address} ${n.state}`)));
    h.fleet.onHealthChanges((_, c) =>
      changes.push({
        nodes: c.nodes.map((n) => `${n.address} ${n.state}`),
        removed: c.removed.map((n) => n.address),
      }),
    );
    const node = (address: string, state: string) =>
      create(NodeHealthSchema, { upstream: "first", address, state });
    const dp = new TestDataPlane(h.client);
    const headers = new Promise<grpc.Metadata>((resolve) => dp.call.on("metadata", resolve));
    dp.hello("dp-1");
    expect((await headers).get(HEALTH_CHANGES_HEADER)).toEqual(["1"]);
    await dp.next();
    dp.send({
      case: "health",
      value: create(NodeHealthReportSchema, {
        nodes: [node("127.0.0.1:1", "healthy"), node("127.0.0.1:2", "healthy")],
      }),
    });
    dp.send({
      case: "health",
      value: create(NodeHealthReportSchema, {
        changesOnly: true,
        nodes: [node("127.0.0.1:1", "quarantined"), node("127.0.0.1:1", "evicted")],
        removed: [create(NodeHealthSchema, { upstream: "first", address: "127.0.0.1:2" })],
      }),
    });
    await vi.waitFor(() => expect(changes).toHaveLength(1));
    expect(whole).toEqual([["127.0.0.1:1 healthy", "127.0.0.1:2 healthy"]]);
    expect(changes).toEqual([
      { nodes: ["127.0.0.1:1 quarantined", "127.0.0.1:1 evicted"], removed: ["127.0.0.1:2"] },
    ]);
  });

  it("takes in the health reports a data plane sent before ending its writes, in order, before the stream ends", async () => {
    const h = await harness();
    const health = new FleetHealth({ fleet: h.fleet });
    cleanups.push(() => health.close());
    // Big enough to be taken in over many turns: the end of the stream arrives meanwhile.
    const nodes = evictedNodes(20_000).map((n) =>
      create(NodeHealthSchema, { ...n, changedAtMs: BigInt(n.changedAtMs) }),
    );
    const back = create(NodeHealthSchema, { ...nodes[7]!, state: "healthy", changedAtMs: 1n });
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    await dp.next();
    dp.send({ case: "health", value: create(NodeHealthReportSchema, { nodes }) });
    dp.send({
      case: "health",
      value: create(NodeHealthReportSchema, { changesOnly: true, nodes: [back] }),
    });
    dp.call.end();

    expect((await dp.status).code).toBe(grpc.status.OK);
    await health.settled();
    // Both reports are in the view now, not only after the reconnect grace.
    expect(health.nodesWhere("evicted")).toHaveLength(nodes.length - 1);
    expect(health.node(back.upstream, back.address)?.majority).toBe("healthy");
    expect(h.fleet.get("dp-1")?.connected).toBe(false);
  });

  it("refuses a changes-only health report on a stream with no whole report yet, naming it", async () => {
    const h = await harness();
    const changes: unknown[] = [];
    h.fleet.onHealthChanges((_, c) => changes.push(c));
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    await dp.next();
    dp.send({
      case: "health",
      value: create(NodeHealthReportSchema, {
        changesOnly: true,
        nodes: [
          create(NodeHealthSchema, { upstream: "first", address: "127.0.0.1:1", state: "evicted" }),
        ],
      }),
    });
    const status = await dp.status;
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toContain("changes_only before any whole report on this stream");
    expect(changes).toEqual([]);
    expect(h.logs.some((l) => l.msg.includes("no whole view to apply it on"))).toBe(true);
  });

  it("ends a stream that sends no Hello, freeing its slot", async () => {
    const h = await harness({ maxStreams: 1, helloTimeoutMs: 50 });
    const silent = new TestDataPlane(h.client);
    // Nothing written: the stream opens with the call's headers.
    const status = await silent.status;
    expect(status.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(status.details).toBe("no Hello within 50 ms of opening the stream");

    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");
    await dp.next();
    expect(h.fleet.get("dp-1")?.connected).toBe(true);
  });

  it("refuses a stream over grpcMaxStreams with RESOURCE_EXHAUSTED until one ends", async () => {
    const h = await harness({ maxStreams: 1 });
    const first = new TestDataPlane(h.client);
    first.hello("dp-1");
    await first.next();

    const second = new TestDataPlane(h.client);
    second.hello("dp-2");
    const refused = await second.status;
    expect(refused.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(refused.details).toContain("grpcMaxStreams 1");
    expect(h.fleet.get("dp-2")).toBeUndefined();
    expect(h.logs.some((line) => line.msg.includes("too many open streams"))).toBe(true);

    // The slot is free again once the first stream is over.
    first.call.cancel();
    await h.waitForState("dp-1", "DISCONNECTED");
    const third = new TestDataPlane(h.client);
    third.hello("dp-3");
    await third.next();
    expect(h.fleet.get("dp-3")?.connected).toBe(true);
  });
});
