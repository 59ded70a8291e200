import { mkdtemp, readFile, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  create,
  HelloSchema,
  NodeHealthReportSchema,
  PROTOCOL_VERSION,
  type StreamSnapshotsRequest,
  StreamSnapshotsRequestSchema,
  type StreamSnapshotsResponse,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildAdminApp } from "../admin/app.js";
import { runClawctl } from "../cli/clawctl-program.js";
import { alwaysLeader, type LeaderElection } from "../election/leader-election.js";
import { Fleet } from "../fleet/fleet.js";
import { type SnapshotServer, startSnapshotServer } from "../grpc/snapshot-server.js";
import type { HealEvent } from "../journal/heal-event.js";
import { Journal } from "../journal/journal.js";
import { configPolicySource } from "../remediation/config-policy-source.js";
import {
  type RemediationAttemptResult,
  RemediationRunner,
} from "../remediation/remediation-runner.js";
import { ConfigService } from "../resources/config-service.js";
import { SnapshotBuilder } from "../snapshot/snapshot-builder.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { FleetHealth } from "./fleet-health.js";

const PREFIX = "/clawgate/";
const RECORDER = fileURLToPath(new URL("../remediation/testdata/record-argv.mjs", import.meta.url));
const NODE_1 = "127.0.0.1:9001";
const NODE_2 = "127.0.0.1:9002";
const method = snapshotServiceDefinition.streamSnapshots;

/** A data plane's end of the stream: says Hello, then sends health reports. */
class FakeDataPlane {
  readonly call: grpc.ClientDuplexStream<StreamSnapshotsRequest, StreamSnapshotsResponse>;

  constructor(client: grpc.Client, nodeId: string) {
    this.call = client.makeBidiStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
    );
    this.call.on("error", () => undefined);
    this.call.on("data", () => undefined);
    this.send({
      case: "hello",
      value: create(HelloSchema, {
        nodeId,
        hostname: `${nodeId}.local`,
        softwareVersion: "1.0.0",
        protocolVersion: PROTOCOL_VERSION,
        lastAppliedVersion: 0n,
      }),
    });
  }

  report(nodes: Array<[address: string, state: string, evidence: string]>): void {
    this.send({
      case: "health",
      value: create(NodeHealthReportSchema, {
        nodes: nodes.map(([address, state, evidence]) => ({
          upstream: "x",
          address,
          state,
          evidence,
          changedAtMs: 1_750_000_000_000n,
        })),
      }),
    });
  }

  private send(message: StreamSnapshotsRequest["message"]): void {
    this.call.write(create(StreamSnapshotsRequestSchema, { message }));
  }
}

let dir: string;
let recording: string;
let store: Store;
let builder: SnapshotBuilder;
let server: SnapshotServer;
let client: grpc.Client;
let app: FastifyInstance;
let journal: Journal;
let health: FleetHealth;
let runner: RemediationRunner;
let election: LeaderElection;
const events: HealEvent[] = [];
const results: RemediationAttemptResult[] = [];

/** Resolves once `predicate` holds, re-checked after every journal event and remediation result. */
function waitFor(predicate: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!predicate()) return;
      offJournal();
      offRunner();
      resolve();
    };
    const offJournal = journal.onRecord(check);
    const offRunner = runner.onResult(check);
    check();
  });
}

async function recordedArgs(): Promise<string[][]> {
  const text = await readFile(recording, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line).args);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "clawgate-fleet-health-"));
  recording = join(dir, "argv.jsonl");
  store = await openEmbeddedStore({});
  const config = new ConfigService(store, PREFIX);
  const applied = await config.apply([
    {
      kind: "upstreams",
      name: "x",
      document: {
        nodes: [{ address: NODE_1 }, { address: NODE_2 }],
        remediation: {
          command: [process.execPath, RECORDER, recording, "{host}", "unit@{port}", "{node}"],
        },
      },
    },
  ]);
  expect(applied.ok).toBe(true);
  const logger = pino({ level: "silent" });
  builder = new SnapshotBuilder({
    store,
    prefix: PREFIX,
    logger,
    instanceId: "cp",
    coalesceMs: 1,
    maxDelayMs: 5,
  });
  await builder.start();
  const fleet = new Fleet();
  journal = new Journal({ store, prefix: PREFIX });
  journal.onRecord((event) => events.push(event));
  health = new FleetHealth({ fleet, journal, logger });
  election = alwaysLeader();
  runner = new RemediationRunner({
    health,
    policies: configPolicySource(config),
    journal,
    election,
    source: "control-plane/cp-test",
    logger,
    allow: { commands: [process.execPath], webhookOrigins: [] },
    // Test containers often run as root; what is tested here is not the root refusal.
    allowRoot: true,
  });
  runner.onResult((result) => results.push(result));
  runner.start();
  await election.start();
  server = await startSnapshotServer({
    address: "127.0.0.1:0",
    builder,
    fleet,
    logger,
  });
  client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  app = await buildAdminApp({
    config,
    snapshot: builder,
    fleet,
    journal,
    health,
    remediation: runner,
    remediationAllowlist: { commands: [process.execPath], webhookOrigins: [] },
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
});

afterAll(async () => {
  client?.close();
  await runner?.stop();
  await election?.stop();
  health?.close();
  await app?.close();
  await server?.close(1_000);
  await builder?.stop();
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

async function getHealth(name: string) {
  return app.inject({ method: "GET", url: `/v1/upstreams/${name}/health` });
}

describe("fleet health over the snapshot stream", () => {
  it("counts two data planes' reports, journals their changes and remediates once", async () => {
    const a = new FakeDataPlane(client, "dp-a");
    const b = new FakeDataPlane(client, "dp-b");
    a.report([
      [NODE_1, "healthy", "200 ok"],
      [NODE_2, "healthy", "200 ok"],
    ]);
    b.report([
      [NODE_1, "quarantined", "connect ECONNREFUSED"],
      [NODE_2, "healthy", "200 ok"],
    ]);
    await waitFor(() => events.some((e) => e.action === "quarantine"));

    const before = (await getHealth("x")).json();
    expect(before.dataPlanes).toBe(2);
    expect(
      before.nodes.map((n: Record<string, unknown>) => [
        n.address,
        n.healthy,
        n.quarantined,
        n.evicted,
        n.total,
        n.majority,
      ]),
    ).toEqual([
      [NODE_1, 1, 1, 0, 2, "split"],
      [NODE_2, 2, 0, 0, 2, "healthy"],
    ]);

    // Both evict node 1: the majority does, so the remediation command runs once.
    a.report([
      [NODE_1, "evicted", "2 probe failures: ECONNREFUSED"],
      [NODE_2, "healthy", "200 ok"],
    ]);
    b.report([
      [NODE_1, "evicted", "2 probe failures: ECONNREFUSED"],
      [NODE_2, "healthy", "200 ok"],
    ]);
    await waitFor(() => results.length === 1);
    expect(results[0]).toMatchObject({ upstream: "x", address: NODE_1, attempt: 1, outcome: "ok" });
    expect(await recordedArgs()).toEqual([["127.0.0.1", "unit@9001", NODE_1]]);

    const evicted = (await getHealth("x")).json().nodes[0];
    expect(evicted).toMatchObject({ address: NODE_1, evicted: 2, total: 2, majority: "evicted" });
    expect(evicted.remediation).toMatchObject({ attempts: 1, running: false, lastOutcome: "ok" });
    // The next attempt is scheduled after the first one's result (the backoff), compared with
    // the journal's record of that result rather than with a wall clock read here.
    const finished = events.find((e) => e.action === "remediation_result" && e.node === NODE_1);
    expect(Date.parse(evicted.remediation.nextAttemptAt)).toBeGreaterThan(
      Date.parse(finished!.time),
    );

    // More reports while the 5 s backoff lasts: the node stays evicted, and nothing runs again.
    // Node 2's quarantine is journaled after those reports were handled (one stream, in order).
    a.report([
      [NODE_1, "evicted", "still refused"],
      [NODE_2, "healthy", "200 ok"],
    ]);
    b.report([
      [NODE_1, "evicted", "still refused"],
      [NODE_2, "quarantined", "reset"],
    ]);
    await waitFor(() => events.some((e) => e.action === "quarantine" && e.node === NODE_2));
    expect(await recordedArgs()).toHaveLength(1);
    expect(results).toHaveLength(1);

    const journaled = events.map((e) => [e.source, e.action, e.node, e.outcome ?? "-"]);
    expect(journaled).toEqual([
      ["dp-b", "quarantine", NODE_1, "-"],
      ["dp-a", "evict", NODE_1, "-"],
      ["dp-b", "evict", NODE_1, "-"],
      ["control-plane/cp-test", "remediation_attempt", NODE_1, "-"],
      ["control-plane/cp-test", "remediation_result", NODE_1, "ok"],
      ["dp-b", "quarantine", NODE_2, "-"],
    ]);
    expect(events[1]?.evidence).toBe("2 probe failures: ECONNREFUSED");

    // Readmitted by both: two readmit events, and the episode is over.
    a.report([
      [NODE_1, "healthy", "200 ok"],
      [NODE_2, "healthy", "200 ok"],
    ]);
    b.report([
      [NODE_1, "healthy", "200 ok"],
      [NODE_2, "healthy", "200 ok"],
    ]);
    await waitFor(() => events.filter((e) => e.action === "readmit").length === 3);
    const after = (await getHealth("x")).json().nodes[0];
    expect(after).toMatchObject({ healthy: 2, majority: "healthy" });
    expect(after.remediation).toBeUndefined();

    // clawctl prints the table.
    let stdout = "";
    const port = (app.server.address() as AddressInfo).port;
    const code = await runClawctl(["health", "x"], {
      env: { CLAWGATE_ADMIN_URL: `http://127.0.0.1:${port}` },
      stdout: (text) => {
        stdout += text;
      },
      stderr: () => undefined,
      readFile: async () => {
        throw new Error("no token file");
      },
    });
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(
      /^ADDRESS\s+MAJORITY\s+HEALTHY\s+QUARANTINED\s+EVICTED\s+REPORTING\s+REMEDIATION\s+EVIDENCE$/,
    );
    expect(lines[1]).toMatch(/^127\.0\.0\.1:9001\s+healthy\s+2\s+0\s+0\s+2\s+-\s+200 ok$/);
    expect(lines).toHaveLength(3);
    a.call.end();
    b.call.end();
  });

  it("answers 404 for an unknown upstream", async () => {
    const response = await getHealth("nope");
    expect(response.statusCode).toBe(404);
    expect(response.json().error.code).toBe("CLAWGATE_NOT_FOUND");
  });
});
