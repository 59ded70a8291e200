import { EventEmitter } from "node:events";
import { createServer } from "node:net";
import {
  type Ack,
  create,
  type EncodedOrResponse,
  type Hello,
  type Nack,
  type NodeHealth,
  NodeHealthSchema,
  PROTOCOL_VERSION,
  type Snapshot,
  type SnapshotDelta,
  SnapshotSchema,
  type StreamSnapshotsRequest,
  StreamSnapshotsResponseSchema,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import {
  AppliedSnapshot,
  type CompiledSnapshot,
  type CompileResult,
} from "../runtime/applied-snapshot.js";
import { deltaOf, routeAt, snapshotOf } from "../testing/delta-fixture.js";
import type { ConnectionState } from "./connection-state.js";
import { SnapshotClient, type SnapshotClientOptions } from "./snapshot-client.js";

type ServerCall = grpc.ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse>;

/** Resolves once probe() returns a value, re-checking whenever the emitter says "change". */
function until<T>(events: EventEmitter, probe: () => T | undefined | false): Promise<T> {
  return new Promise((resolve) => {
    const check = () => {
      const value = probe();
      if (value === undefined || value === false) return;
      events.off("change", check);
      resolve(value);
    };
    events.on("change", check);
    check();
  });
}

/** A control plane reduced to the stream: records what the data plane says, sends on demand. */
class FakeControlPlane {
  readonly hellos: Hello[] = [];
  readonly acks: Ack[] = [];
  readonly nacks: Nack[] = [];
  /** Every message kind in arrival order, with the index of the stream it came on. */
  readonly messages: { stream: number; kind: string; health?: NodeHealth[] }[] = [];
  readonly calls: ServerCall[] = [];
  readonly events = new EventEmitter();
  address = "";
  readonly #server = new grpc.Server();

  /** onHello runs for each new stream once its Hello arrives. */
  constructor(private readonly onHello: (call: ServerCall, hello: Hello) => void = () => {}) {
    this.#server.addService(snapshotServiceDefinition, {
      streamSnapshots: (call: ServerCall) => this.#serve(call),
    });
  }

  async start(): Promise<this> {
    const port = await new Promise<number>((resolve, reject) =>
      this.#server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    this.address = `127.0.0.1:${port}`;
    return this;
  }

  #serve(call: ServerCall): void {
    const stream = this.calls.length;
    this.calls.push(call);
    call.on("error", () => {});
    call.on("cancelled", () => this.events.emit("change"));
    call.on("data", (request: StreamSnapshotsRequest) => {
      const { message } = request;
      this.messages.push({
        stream,
        kind: message.case ?? "empty",
        ...(message.case === "health" ? { health: message.value.nodes } : {}),
      });
      if (message.case === "hello") {
        this.hellos.push(message.value);
        this.onHello(call, message.value);
      } else if (message.case === "ack") {
        this.acks.push(message.value);
      } else if (message.case === "nack") {
        this.nacks.push(message.value);
      }
      this.events.emit("change");
    });
  }

  until<T>(probe: () => T | undefined | false): Promise<T> {
    return until(this.events, probe);
  }

  shutdown(): void {
    this.#server.forceShutdown();
  }
}

type SnapshotInit = Parameters<typeof create<typeof SnapshotSchema>>[1];

function snapshot(version: number, init: SnapshotInit = {}): Snapshot {
  return create(SnapshotSchema, { version: BigInt(version), nonce: `nonce-${version}`, ...init });
}

function nodeHealth(address: string, state: string): NodeHealth {
  return create(NodeHealthSchema, {
    upstream: "agents",
    address,
    state,
    evidence: state === "healthy" ? "tcp 0.4ms, http 200" : "error ECONNREFUSED",
    changedAtMs: 1_700_000_000_000n,
  });
}

/** The (address, state) pairs of each health report a control plane received on `stream`. */
function reportsOn(cp: FakeControlPlane, stream: number): string[][] {
  return cp.messages
    .filter((m) => m.stream === stream && m.kind === "health")
    .map((m) => m.health!.map((node) => `${node.address} ${node.state}`));
}

function send(call: ServerCall, value: Snapshot): void {
  call.write(create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value } }));
}

/** A free loopback port with nothing listening: connections to it are refused at once. */
async function deadAddress(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return `127.0.0.1:${port}`;
}

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

function startClient(overrides: Partial<SnapshotClientOptions> & { addresses: string[] }) {
  const logs: Array<Record<string, unknown>> = [];
  const states: ConnectionState[] = [];
  const events = new EventEmitter();
  const logger = pino(
    { level: "debug" },
    {
      write(line: string) {
        logs.push(JSON.parse(line));
        events.emit("change");
      },
    },
  );
  const client = new SnapshotClient({
    nodeId: "dp-1",
    hostname: "host-1",
    softwareVersion: "0.1.0-test",
    apply: () => ({ ok: true }),
    lastAppliedVersion: () => 0,
    logger,
    backoff: { baseMs: 1, maxMs: 20 },
    ...overrides,
  });
  client.onStateChange((state) => {
    states.push(state);
    events.emit("change");
  });
  client.start();
  cleanup.push(() => client.stop());
  return {
    client,
    logs,
    states,
    until: <T>(probe: () => T | undefined | false) => until(events, probe),
  };
}

async function controlPlane(onHello?: (call: ServerCall, hello: Hello) => void) {
  const cp = await new FakeControlPlane(onHello).start();
  cleanup.push(() => cp.shutdown());
  return cp;
}

// Compiles by a rule the test controls, so a NACK is provoked without depending on compiler rules.
function fakeCompile(wire: Snapshot): CompileResult {
  if (wire.routes.some((route) => route.upstream === "missing")) {
    return { ok: false, reason: "route r: unknown upstream missing", problems: [] };
  }
  const compiled = { version: Number(wire.version), source: wire };
  return { ok: true, value: compiled as unknown as CompiledSnapshot };
}

describe("SnapshotClient", () => {
  it("opens each stream with a Hello naming itself, the protocol and its applied version", async () => {
    const cp = await controlPlane();
    startClient({ addresses: [cp.address], lastAppliedVersion: () => 7 });
    const hello = await cp.until(() => cp.hellos[0]);
    expect(hello).toMatchObject({
      nodeId: "dp-1",
      hostname: "host-1",
      softwareVersion: "0.1.0-test",
      protocolVersion: PROTOCOL_VERSION,
      lastAppliedVersion: 7n,
    });
  });

  it("applies a snapshot and acks its version and nonce", async () => {
    const cp = await controlPlane((call) => send(call, snapshot(3)));
    const applied: number[] = [];
    const dp = startClient({
      addresses: [cp.address],
      apply: (wire) => {
        applied.push(Number(wire.version));
        return { ok: true };
      },
    });
    const ack = await cp.until(() => cp.acks[0]);
    expect(ack).toMatchObject({ version: 3n, nonce: "nonce-3" });
    expect(applied).toEqual([3]);
    await dp.until(() => dp.client.state().status === "connected");
    expect(dp.client.state()).toEqual({ status: "connected", address: cp.address });
  });

  it("nacks a snapshot that fails to apply, with the reason, and keeps the previous one", async () => {
    const cp = await controlPlane((call) => {
      send(call, snapshot(1));
      send(call, snapshot(2, { routes: [{ name: "r", upstream: "missing" }] }));
    });
    const applied = new AppliedSnapshot({ compile: fakeCompile });
    const dp = startClient({
      addresses: [cp.address],
      apply: (wire) => {
        const result = applied.apply(wire);
        return result.ok ? { ok: true } : { ok: false, reason: result.reason };
      },
    });
    const nack = await cp.until(() => cp.nacks[0]);
    expect(nack).toMatchObject({
      version: 2n,
      nonce: "nonce-2",
      errorDetail: "route r: unknown upstream missing",
    });
    expect(cp.acks.map((ack) => ack.version)).toEqual([1n]);
    expect(applied.version()).toBe(1);
    // A NACK is an answer, not a failure: the stream stays up.
    expect(cp.hellos).toHaveLength(1);
    expect(dp.logs.some((line) => line.msg?.toString().includes("NACK"))).toBe(true);
  });

  it("nacks rather than crashing when apply throws", async () => {
    const cp = await controlPlane((call) => send(call, snapshot(4)));
    startClient({
      addresses: [cp.address],
      apply: () => {
        throw new Error("boom");
      },
    });
    const nack = await cp.until(() => cp.nacks[0]);
    expect(nack.errorDetail).toBe("apply failed: boom");
  });

  it("moves to the second control plane when the first shuts down", async () => {
    const first = await controlPlane((call) => send(call, snapshot(1)));
    const second = await controlPlane((call, hello) => {
      if (hello.lastAppliedVersion < 2n) send(call, snapshot(2));
    });
    let version = 0;
    const dp = startClient({
      addresses: [first.address, second.address],
      lastAppliedVersion: () => version,
      apply: (wire) => {
        version = Number(wire.version);
        return { ok: true };
      },
    });
    await first.until(() => first.acks[0]);
    first.shutdown();

    const hello = await second.until(() => second.hellos[0]);
    expect(hello.lastAppliedVersion).toBe(1n);
    expect(await second.until(() => second.acks[0])).toMatchObject({ version: 2n });
    await dp.until(() => dp.client.state().status === "connected");
    expect(dp.client.state()).toEqual({ status: "connected", address: second.address });
    expect(dp.states).toContainEqual(expect.objectContaining({ nextAddress: second.address }));
  });

  it("waits longer after each failed attempt, jittered, and resets after a delivered snapshot", async () => {
    const dead = await deadAddress();
    // The live control plane delivers one snapshot, then ends the stream cleanly.
    const live = await controlPlane((call) => send(call, snapshot(1)));
    live.events.on("change", () => {
      for (const call of live.calls) if (live.acks.length > 0 && !call.writableEnded) call.end();
    });
    const dp = startClient({
      addresses: [dead, live.address, dead, dead],
      backoff: { baseMs: 10, maxMs: 1_000 },
      random: () => 0.5,
    });
    const waits = await dp.until(() => {
      const waiting = dp.states.filter((state) => state.status === "waiting");
      return waiting.length >= 4 ? waiting : undefined;
    });
    // dead: window 10; live delivered, so back to window 10; then dead twice: 20, 40.
    expect(waits.slice(0, 4).map((state) => state.retryInMs)).toEqual([5, 5, 10, 20]);
    expect(waits[0]?.reason).toMatch(/^UNAVAILABLE/);
  });

  it("logs an incompatible protocol with both versions and retries at the max backoff", async () => {
    const cp = await controlPlane((call) => {
      const metadata = new grpc.Metadata();
      metadata.set("clawgate-protocol-version", "2");
      call.emit("error", {
        code: grpc.status.FAILED_PRECONDITION,
        details: "control plane speaks protocol 2; data plane sent 1",
        metadata,
      });
    });
    const dp = startClient({ addresses: [cp.address], backoff: { baseMs: 1, maxMs: 60_000 } });
    const waiting = await dp.until(() => {
      const state = dp.client.state();
      return state.status === "waiting" ? state : undefined;
    });
    expect(waiting.retryInMs).toBe(60_000);
    const line = dp.logs.find((entry) => entry.level === 50);
    expect(line).toMatchObject({
      dataPlaneProtocolVersion: PROTOCOL_VERSION,
      controlPlaneProtocolVersion: "2",
      controlPlane: cp.address,
    });
    expect(line?.msg).toContain(`data plane speaks protocol ${PROTOCOL_VERSION}`);
    expect(line?.msg).toContain("speaks 2");
  });

  it("sends each node-health report, the whole view, on the open stream", async () => {
    const cp = await controlPlane();
    const dp = startClient({ addresses: [cp.address] });
    await cp.until(() => cp.hellos[0]);
    dp.client.sendHealth([nodeHealth("10.0.0.1:80", "healthy")]);
    dp.client.sendHealth([
      nodeHealth("10.0.0.1:80", "evicted"),
      nodeHealth("10.0.0.2:80", "healthy"),
    ]);
    await cp.until(() => reportsOn(cp, 0).length === 2);
    expect(reportsOn(cp, 0)).toEqual([
      ["10.0.0.1:80 healthy"],
      ["10.0.0.1:80 evicted", "10.0.0.2:80 healthy"],
    ]);
    const [, second] = cp.messages.filter((m) => m.kind === "health");
    expect(second?.health?.[0]).toMatchObject({
      upstream: "agents",
      evidence: "error ECONNREFUSED",
      changedAtMs: 1_700_000_000_000n,
    });
  });

  it("sends a report too big for one turn whole, and later ones after it, in order", async () => {
    const cp = await controlPlane();
    const dp = startClient({ addresses: [cp.address] });
    await cp.until(() => cp.hellos[0]);
    const big = (state: string) =>
      Array.from({ length: 5_000 }, (_, k) => nodeHealth(`10.0.${k >> 8}.${k & 255}:80`, state));
    dp.client.sendHealth(big("evicted"));
    // Given while the big one is still being encoded: it must not overtake it, nor be lost.
    dp.client.sendHealth([nodeHealth("10.0.0.1:80", "quarantined")]);
    dp.client.sendHealth(big("healthy"));
    dp.client.sendHealth([nodeHealth("10.0.0.1:80", "healthy")]);
    await cp.until(() => reportsOn(cp, 0).length === 4);
    expect(reportsOn(cp, 0).map((r) => [r.length, r[0]])).toEqual([
      [5_000, "10.0.0.0:80 evicted"],
      [1, "10.0.0.1:80 quarantined"],
      [5_000, "10.0.0.0:80 healthy"],
      [1, "10.0.0.1:80 healthy"],
    ]);
  });

  it("while the control plane does not read, only the latest report waits (no queue of old views)", async () => {
    // A control plane that stops reading: flow control fills the stream, and writes back up.
    const cp = await controlPlane((call) => call.pause());
    const dp = startClient({ addresses: [cp.address] });
    await cp.until(() => cp.hellos[0]);
    const reports = 1_000;
    // Report i is 200 nodes, the first of which says which report it is.
    const report = (i: number) => [
      nodeHealth(`10.9.${Math.floor(i / 250)}.${i % 250}:80`, "evicted"),
      ...Array.from({ length: 199 }, (_, k) =>
        nodeHealth(`10.0.${k >> 8}.${k & 255}:80`, "evicted"),
      ),
    ];
    for (let i = 0; i < reports; i++) dp.client.sendHealth(report(i));
    const latest = `10.9.${Math.floor((reports - 1) / 250)}.${(reports - 1) % 250}:80 evicted`;
    cp.calls[0]!.resume();
    await cp.until(() => reportsOn(cp, 0).at(-1)?.[0] === latest);
    // Those the stream took before it was full, then the latest: not a thousand stale views.
    expect(reportsOn(cp, 0).length).toBeLessThan(100);
    expect(reportsOn(cp, 0).at(-1)?.[0]).toBe(latest);
  });

  it("resends the latest report right after every Hello, so a new control plane learns it", async () => {
    const first = await controlPlane();
    const second = await controlPlane();
    const dp = startClient({ addresses: [first.address, second.address] });
    await first.until(() => first.hellos[0]);
    dp.client.sendHealth([nodeHealth("10.0.0.1:80", "healthy")]);
    dp.client.sendHealth([nodeHealth("10.0.0.1:80", "quarantined")]);
    await first.until(() => reportsOn(first, 0).length === 2);
    first.shutdown();

    await second.until(() => reportsOn(second, 0).length === 1);
    // Hello first (the control plane refuses anything else first), then the current view only.
    expect(second.messages.slice(0, 2).map((m) => m.kind)).toEqual(["hello", "health"]);
    expect(reportsOn(second, 0)).toEqual([["10.0.0.1:80 quarantined"]]);
  });

  it("keeps a report given while no stream is open and sends it after the Hello", async () => {
    const dead = await deadAddress();
    const cp = await controlPlane();
    const dp = startClient({ addresses: [dead, cp.address] });
    dp.client.sendHealth([nodeHealth("10.0.0.3:80", "evicted")]);
    await cp.until(() => reportsOn(cp, 0).length === 1);
    expect(cp.messages.map((m) => m.kind)).toEqual(["hello", "health"]);
    expect(reportsOn(cp, 0)).toEqual([["10.0.0.3:80 evicted"]]);
  });

  it("stop() closes the stream and stops reconnecting", async () => {
    const cp = await controlPlane();
    const dp = startClient({ addresses: [cp.address] });
    await cp.until(() => cp.hellos[0]);
    await dp.until(() => dp.client.state().status === "connected");
    await dp.client.stop();
    expect(dp.client.state()).toEqual({ status: "stopped" });
    await cp.until(() => cp.calls[0]?.cancelled);
    expect(cp.hellos).toHaveLength(1);
    expect(dp.states.at(-1)).toEqual({ status: "stopped" });
  });
});

describe("SnapshotClient with deltas and parts", () => {
  function sendDelta(call: ServerCall, value: SnapshotDelta): void {
    call.write(create(StreamSnapshotsResponseSchema, { message: { case: "delta", value } }));
  }

  /** A data plane's apply path on a real AppliedSnapshot, as main.ts wires it. */
  function realApply(applied: AppliedSnapshot) {
    return {
      apply: (wire: Snapshot) => applied.apply(wire),
      applyDelta: (delta: SnapshotDelta) => applied.applyDelta(delta),
      lastAppliedVersion: () => applied.version(),
    };
  }

  it("says it takes deltas, applies one on the version it serves and ACKs it", async () => {
    const applied = new AppliedSnapshot();
    const cp = await controlPlane((call) => {
      send(call, snapshotOf(10, 20, 4));
      sendDelta(call, deltaOf(11, { routes: [routeAt(5, 4, 0, "/moved")] }));
    });
    startClient({ addresses: [cp.address], ...realApply(applied) });
    await cp.until(() => cp.acks.length === 2);
    expect(cp.hellos[0]?.acceptsDeltas).toBe(true);
    expect(cp.acks.map((a) => [a.version, a.nonce])).toEqual([
      [10n, "n10"],
      [11n, "n11"],
    ]);
    expect(applied.version()).toBe(11);
    expect(applied.current()?.match("GET", "x", "/api/v2/s5/moved/1", {})?.name).toBe("r-5");
  });

  it("logs how long each apply ran with its ACK, a whole snapshot's and a delta's", async () => {
    const applied = new AppliedSnapshot();
    const cp = await controlPlane((call) => {
      send(call, snapshotOf(10, 20, 4));
      sendDelta(call, deltaOf(11, { routes: [routeAt(5, 4, 0, "/moved")] }));
    });
    // Each apply reads the clock at its start and its end: 0 to 12.5, then 100 to 101.25.
    const readings = [0, 12.5, 100, 101.25];
    const dp = startClient({
      addresses: [cp.address],
      ...realApply(applied),
      clock: () => readings.shift() ?? Number.NaN,
    });
    await cp.until(() => cp.acks.length === 2);
    const appliedLines = dp.logs.filter((line) => line.msg === "snapshot applied");
    expect(appliedLines.map((line) => [line.version, line.applyMs])).toEqual([
      [10, 12.5],
      [11, 1.25],
    ]);
  });

  it("asks for the whole snapshot when a delta is not on the version it serves, and keeps serving", async () => {
    const applied = new AppliedSnapshot();
    const cp = await controlPlane((call) => {
      send(call, snapshotOf(10, 20, 4));
      // Built on 11, which this data plane never had.
      sendDelta(call, deltaOf(12, { routes: [routeAt(5, 4, 0, "/moved")] }));
    });
    startClient({ addresses: [cp.address], ...realApply(applied) });
    await cp.until(() => cp.nacks.length === 1);
    expect(cp.nacks[0]).toMatchObject({ version: 12n, nonce: "n12", wantsFullSnapshot: true });
    expect(cp.nacks[0]?.errorDetail).toContain(
      "delta 12 is on version 11; this data plane serves 10",
    );
    expect(applied.version()).toBe(10);
    expect(applied.current()?.match("GET", "x", "/api/v2/s5/moved/1", {})?.pathValue).toBe(
      "/api/v2/s5",
    );
  });

  it("NACKs a delta that does not check out, without wantsFullSnapshot, and never serves it", async () => {
    const applied = new AppliedSnapshot();
    const cp = await controlPlane((call) => {
      send(call, snapshotOf(10, 20, 4));
      sendDelta(call, deltaOf(11, { removedUpstreams: ["u-1"] }));
      // The next good delta is on 10 still: 11 was never served.
      sendDelta(call, deltaOf(12, { baseVersion: 10n, routes: [routeAt(2, 4, 4)] }));
    });
    startClient({ addresses: [cp.address], ...realApply(applied) });
    await cp.until(() => cp.acks.length === 2);
    expect(cp.nacks).toHaveLength(1);
    expect(cp.nacks[0]).toMatchObject({ version: 11n, wantsFullSnapshot: false });
    expect(cp.nacks[0]?.errorDetail).toContain("names upstream u-1, which does not exist");
    expect(applied.version()).toBe(12);
    expect(applied.current()?.upstreams.has("u-1")).toBe(true);
  });

  it("applies a snapshot sent in parts once every part is in, in any order", async () => {
    const applied = new AppliedSnapshot();
    const whole = snapshotOf(10, 30, 6);
    const parts = [0, 1, 2].map((part) =>
      snapshot(10, {
        nonce: "n10",
        part,
        parts: 3,
        routes: whole.routes.slice(part * 10, part * 10 + 10),
        upstreams: whole.upstreams.slice(part * 2, part * 2 + 2),
        breakers: part === 1 ? whole.breakers : [],
      }),
    );
    const cp = await controlPlane((call) => {
      for (const part of [parts[2]!, parts[0]!, parts[1]!]) send(call, part);
    });
    startClient({ addresses: [cp.address], ...realApply(applied) });
    await cp.until(() => cp.acks.length === 1);
    expect(cp.acks[0]).toMatchObject({ version: 10n, nonce: "n10" });
    expect(applied.current()?.routeCount).toBe(30);
    expect(applied.current()?.upstreams.size).toBe(6);
  });

  it("never applies a snapshot with a part missing; the next version replaces it", async () => {
    const applied = new AppliedSnapshot();
    const whole = snapshotOf(10, 10, 2);
    const cp = await controlPlane((call) => {
      // Part 1 of 2 never comes; version 11 arrives whole.
      send(call, snapshot(10, { ...whole, nonce: "n10", part: 0, parts: 2 }));
      send(call, snapshotOf(11, 4, 2));
    });
    startClient({ addresses: [cp.address], ...realApply(applied) });
    await cp.until(() => cp.acks.length === 1);
    expect(cp.acks[0]?.version).toBe(11n);
    expect(cp.acks.some((a) => a.version === 10n)).toBe(false);
    expect(applied.current()?.routeCount).toBe(4);
  });
});
