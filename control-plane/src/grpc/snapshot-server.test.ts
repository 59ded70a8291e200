import {
  AckSchema,
  create,
  HelloSchema,
  NackSchema,
  NodeHealthReportSchema,
  NodeHealthSchema,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_TRAILER,
  type Snapshot,
  STREAM_LIMITS,
  type StreamSnapshotsRequest,
  StreamSnapshotsRequestSchema,
  type StreamSnapshotsResponse,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { DataPlaneState } from "../fleet/data-plane-view.js";
import { Fleet } from "../fleet/fleet.js";
import { SnapshotBuilder } from "../snapshot/snapshot-builder.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import {
  MAX_RECEIVE_MESSAGE_BYTES,
  type SnapshotServer,
  startSnapshotServer,
} from "./snapshot-server.js";

const PREFIX = "/clawgate/";
const method = snapshotServiceDefinition.streamSnapshots;

/** A data plane's end of the stream, driven by the test. */
class TestDataPlane {
  readonly call: grpc.ClientDuplexStream<StreamSnapshotsRequest, StreamSnapshotsResponse>;
  readonly status: Promise<grpc.StatusObject>;
  private readonly received: Snapshot[] = [];
  private waiter: ((snapshot: Snapshot) => void) | undefined;

  constructor(client: grpc.Client) {
    this.call = client.makeBidiStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
    );
    this.status = new Promise((resolve) => this.call.on("status", resolve));
    // A non-OK status also arrives as 'error'; the test reads it from `status`.
    this.call.on("error", () => undefined);
    this.call.on("data", (response: StreamSnapshotsResponse) => {
      if (response.message.case !== "snapshot") return;
      const waiter = this.waiter;
      this.waiter = undefined;
      if (waiter) waiter(response.message.value);
      else this.received.push(response.message.value);
    });
  }

  hello(nodeId: string, lastAppliedVersion = 0, protocolVersion = PROTOCOL_VERSION): void {
    this.send({
      case: "hello",
      value: create(HelloSchema, {
        nodeId,
        hostname: `${nodeId}.local`,
        softwareVersion: "1.0.0",
        protocolVersion,
        lastAppliedVersion: BigInt(lastAppliedVersion),
      }),
    });
  }

  ack(snapshot: Snapshot, nonce = snapshot.nonce): void {
    this.send({ case: "ack", value: create(AckSchema, { version: snapshot.version, nonce }) });
  }

  nack(snapshot: Snapshot, errorDetail: string): void {
    this.send({
      case: "nack",
      value: create(NackSchema, { version: snapshot.version, nonce: snapshot.nonce, errorDetail }),
    });
  }

  send(message: StreamSnapshotsRequest["message"]): void {
    this.call.write(create(StreamSnapshotsRequestSchema, { message }));
  }

  next(): Promise<Snapshot> {
    const queued = this.received.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /** Snapshots received and not yet taken with next(). */
  pending(): number {
    return this.received.length;
  }
}

interface Harness {
  store: Store;
  builder: SnapshotBuilder;
  fleet: Fleet;
  server: SnapshotServer;
  client: grpc.Client;
  logs: Array<{ level: number; msg: string; nodeId?: string }>;
  nacks: number;
  /** Bytes the server counted as sent on streams. */
  bytesSent: number;
  /** Writes a config change and resolves with the version it gets published as. */
  change(name: string): Promise<number>;
  waitForState(nodeId: string, state: DataPlaneState): Promise<void>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function harness(
  limits: { maxStreams?: number; maxReceiveMessageBytes?: number; helloTimeoutMs?: number } = {},
): Promise<Harness> {
  const store = await openEmbeddedStore({});
  const logs: Harness["logs"] = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const builder = new SnapshotBuilder({
    store,
    prefix: PREFIX,
    logger,
    instanceId: "cp",
    coalesceMs: 1,
    maxDelayMs: 5,
  });
  const fleet = new Fleet();
  const h: Partial<Harness> = { store, builder, fleet, logs, nacks: 0, bytesSent: 0 };
  await store.commit([], [{ type: "put", key: `${PREFIX}upstreams/first`, value: "{}" }]);
  await builder.start();
  const server = await startSnapshotServer({
    address: "127.0.0.1:0",
    builder,
    fleet,
    logger,
    metrics: {
      recordNack: () => h.nacks!++,
      recordSent: (bytes) => {
        h.bytesSent! += bytes;
      },
    },
    ...limits,
  });
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  cleanups.push(async () => {
    client.close();
    await server.close(1_000);
    await builder.stop();
    await store.close();
  });
  return Object.assign(h, {
    server,
    client,
    async change(name: string) {
      const { revision } = await store.commit(
        [],
        [{ type: "put", key: `${PREFIX}upstreams/${name}`, value: "{}" }],
      );
      await new Promise<void>((resolve) => {
        if ((builder.current()?.version ?? 0) >= revision) return resolve();
        const off = builder.onPublish((p) => {
          if (p.version >= revision) {
            off();
            resolve();
          }
        });
      });
      return builder.current()!.version;
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
  it("answers Hello with the published snapshot and records the Ack", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1");

    const snapshot = await dp.next();
    const published = h.builder.current()!;
    expect(snapshot.version).toBe(BigInt(published.version));
    expect(snapshot.nonce).toBe(`cp-${published.version}`);
    expect(snapshot.upstreams.map((u) => u.name)).toEqual(["first"]);
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
    const next = await h.change("second");
    expect((await dp.next()).version).toBe(BigInt(next));
  });

  it("sends nothing to a data plane that already applied the published version", async () => {
    const h = await harness();
    const dp = new TestDataPlane(h.client);
    dp.hello("dp-1", h.builder.current()!.version);
    await h.waitForState("dp-1", "SYNCED");

    const next = await h.change("second");
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

    const next = await h.change("second");
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
    dp.hello("dp-old", 0, PROTOCOL_VERSION + 1);
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
    await dp.next();
    const first = h.builder.current()!;
    expect(h.bytesSent).toBe(first.encoded.byteLength);

    await h.change("second");
    await dp.next();
    expect(h.bytesSent).toBe(first.encoded.byteLength + h.builder.current()!.encoded.byteLength);
  });

  it("sends every stream the same build of a version", async () => {
    const h = await harness();
    const a = new TestDataPlane(h.client);
    const b = new TestDataPlane(h.client);
    a.hello("dp-a");
    b.hello("dp-b");
    const [sa, sb] = await Promise.all([a.next(), b.next()]);
    // One build per version: same nonce, same build time, whoever asked.
    expect(sa.nonce).toBe(sb.nonce);
    expect(sa.createdAtMs).toBe(sb.createdAtMs);
    expect(sa.nonce).toBe(h.builder.current()!.nonce);
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
