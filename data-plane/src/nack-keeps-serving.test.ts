import { EventEmitter, once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  create,
  type EncodedOrResponse,
  type Snapshot,
  SnapshotSchema,
  type StreamSnapshotsRequest,
  StreamSnapshotsResponseSchema,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "./config/load-config.js";
import { startDataPlane } from "./main.js";

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** An upstream node that answers with its own name, so a reply says which snapshot routed it. */
async function namedNode(name: string): Promise<string> {
  const server = createServer((_req, res) => res.end(name));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanup.push(() => server.close());
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

type SnapshotInit = Parameters<typeof create<typeof SnapshotSchema>>[1];

/**
 * A control plane that sends `first`, then after each Ack or Nack the next snapshot of `then`;
 * it emits "ack" and "nack" with their messages.
 */
async function controlPlane(first: SnapshotInit, then: SnapshotInit[]) {
  const server = new grpc.Server();
  const events = new EventEmitter();
  const queue = [first, ...then];
  server.addService(snapshotServiceDefinition, {
    streamSnapshots: (call: grpc.ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse>) => {
      call.on("error", () => {});
      const sendNext = () => {
        const next = queue.shift();
        if (next === undefined) return;
        const snapshot: Snapshot = create(SnapshotSchema, next);
        call.write(
          create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value: snapshot } }),
        );
      };
      call.on("data", (request: StreamSnapshotsRequest) => {
        const { message } = request;
        if (message.case === "ack" || message.case === "nack") {
          events.emit(message.case, message.value);
          sendNext();
        }
        if (message.case === "hello") sendNext();
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  cleanup.push(() => server.forceShutdown());
  return { address: `127.0.0.1:${port}`, events };
}

/** Snapshot `version`: route /api to upstream `target`, plus `extra` resources. */
function snapshotOf(
  version: bigint,
  nodes: { a: string; b: string },
  target: "a" | "b",
  extra: Partial<Pick<SnapshotInit & object, "routes" | "upstreams">> = {},
  createdAtMs = 1n,
): SnapshotInit {
  return {
    version,
    nonce: `n${version}`,
    createdAtMs,
    breakers: [{ name: "default" }],
    upstreams: [
      { name: "a", breaker: "default", nodes: [{ address: nodes.a, weight: 1 }] },
      { name: "b", breaker: "default", nodes: [{ address: nodes.b, weight: 1 }] },
      ...(extra.upstreams ?? []),
    ],
    routes: [
      { name: "api", match: { pathPrefix: "/api" }, upstream: target },
      ...(extra.routes ?? []),
    ],
  };
}

describe("a snapshot the data plane refuses", () => {
  it("is NACKed at every step before the swap; the previous version serves and its metric stays", async () => {
    const nodes = { a: await namedNode("a"), b: await namedNode("b") };
    // Each refused snapshot moves /api to upstream b and breaks one rule elsewhere: had it been
    // swapped in before being refused, b would answer.
    const refused: [string, SnapshotInit][] = [
      [
        "a route naming a missing upstream",
        snapshotOf(6n, nodes, "b", {
          routes: [{ name: "orphan", match: { path: "/o" }, upstream: "gone" }],
        }),
      ],
      [
        "a node address without a port",
        snapshotOf(7n, nodes, "b", {
          upstreams: [{ name: "c", nodes: [{ address: "10.0.0.1", weight: 1 }] }],
        }),
      ],
      [
        "a route path no request can reach",
        snapshotOf(8n, nodes, "b", {
          routes: [{ name: "slash", match: { pathPrefix: "/a%2Fb" }, upstream: "a" }],
        }),
      ],
      ["a creation time beyond 2^53", snapshotOf(9n, nodes, "b", {}, 2n ** 60n)],
      [
        "a repeated route name",
        snapshotOf(10n, nodes, "b", {
          routes: [{ name: "api", match: { path: "/x" }, upstream: "b" }],
        }),
      ],
    ];
    const cp = await controlPlane(
      snapshotOf(5n, nodes, "a"),
      refused.map(([, init]) => init),
    );
    const acked = once(cp.events, "ack");
    const nacks: { version: bigint; errorDetail: string }[] = [];
    const allNacked = new Promise<void>((resolve) =>
      cp.events.on("nack", (nack) => {
        nacks.push(nack);
        if (nacks.length === refused.length) resolve();
      }),
    );
    const cacheDir = mkdtempSync(join(tmpdir(), "clawgate-dp-nack-"));
    cleanup.push(() => rmSync(cacheDir, { recursive: true, force: true }));
    const dp = await startDataPlane(
      loadConfig({
        argv: [
          "--proxy-listen=127.0.0.1:0",
          "--admin-listen=127.0.0.1:0",
          `--cache-dir=${cacheDir}`,
          `--cp-addresses=${cp.address}`,
        ],
        env: { CLAWGATE_LOG_LEVEL: "silent" },
      }),
    );
    cleanup.push(() => dp.stop());

    expect((await acked)[0]).toMatchObject({ version: 5n });
    await allNacked;
    expect(nacks.map((nack) => nack.version)).toEqual([6n, 7n, 8n, 9n, 10n]);
    expect(nacks.map((nack) => nack.errorDetail)).toEqual([
      'route "orphan": upstream names upstream gone, which does not exist',
      'upstream "c": nodes.0.address is not host:port',
      expect.stringMatching(/^route "slash": match\.pathPrefix must start with "\/"/),
      "snapshot: createdAtMs is beyond 2^53",
      'route "api": name is repeated',
    ]);

    const reply = await fetch(`http://${dp.proxyAddress}/api/x`);
    expect(await reply.text()).toBe("a");
    const metrics = await (await fetch(`http://${dp.adminAddress}/metrics`)).text();
    expect(metrics).toMatch(/^clawgate_snapshot_version 5$/m);
    expect(metrics).toMatch(/^clawgate_snapshot_nacks_total 5$/m);
    const ready = await fetch(`http://${dp.adminAddress}/readyz`);
    expect(await ready.json()).toMatchObject({ version: 5 });
  });
});
