import { EventEmitter, once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  create,
  type EncodedOrResponse,
  SnapshotSchema,
  type StreamSnapshotsRequest,
  StreamSnapshotsResponseSchema,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "./config/load-config.js";
import { type RunningDataPlane, startDataPlane } from "./main.js";
import { ListenError } from "./runtime/listen.js";

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function upstream(): Promise<string> {
  const server: Server = createServer((req, res) => res.end(`upstream saw ${req.url}`));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanup.push(() => server.close());
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * A control plane that sends one snapshot routing /api to `node` (probed with `healthCheck`),
 * emits "ack", and emits "health" with the nodes of each health report.
 */
async function controlPlane(node: string, healthCheck?: Record<string, number | string>) {
  const server = new grpc.Server();
  const acks = new EventEmitter();
  server.addService(snapshotServiceDefinition, {
    streamSnapshots: (call: grpc.ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse>) => {
      call.on("error", () => {});
      call.on("data", (request: StreamSnapshotsRequest) => {
        if (request.message.case === "ack") acks.emit("ack", request.message.value);
        if (request.message.case === "health") acks.emit("health", request.message.value.nodes);
        if (request.message.case !== "hello") return;
        const snapshot = create(SnapshotSchema, {
          version: 5n,
          nonce: "n5",
          breakers: [{ name: "default" }],
          upstreams: [
            {
              name: "agents",
              breaker: "default",
              nodes: [{ address: node, weight: 1 }],
              healthCheck,
            },
          ],
          routes: [{ name: "api", match: { pathPrefix: "/api" }, upstream: "agents" }],
        });
        call.write(
          create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value: snapshot } }),
        );
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  cleanup.push(() => server.forceShutdown());
  return { address: `127.0.0.1:${port}`, acks };
}

async function freeAddress(): Promise<string> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `127.0.0.1:${port}`;
}

/** GET on a connection of its own, so it needs the listener to accept one now. */
function getOnNewConnection(address: string, path: string) {
  const [host, port] = address.split(":");
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host, port: Number(port), path, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

function refused(address: string): Promise<boolean> {
  const [host, port] = address.split(":");
  return new Promise((resolve) => {
    const socket = connect({ host, port: Number(port) });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}

function config(argv: string[]) {
  // A fresh cache directory per data plane, so no test reads another's cached snapshot.
  const cacheDir = mkdtempSync(join(tmpdir(), "clawgate-dp-main-"));
  cleanup.push(() => rmSync(cacheDir, { recursive: true, force: true }));
  return loadConfig({
    argv: [
      "--proxy-listen=127.0.0.1:0",
      "--admin-listen=127.0.0.1:0",
      `--cache-dir=${cacheDir}`,
      ...argv,
    ],
    env: { CLAWGATE_LOG_LEVEL: "silent" },
  });
}

describe("startDataPlane", () => {
  it("becomes ready once the control plane's snapshot is applied, then proxies by it", async () => {
    const cp = await controlPlane(await upstream());
    const acked = once(cp.acks, "ack");
    const dp: RunningDataPlane = await startDataPlane(config([`--cp-addresses=${cp.address}`]));
    cleanup.push(() => dp.stop());

    await acked;
    const ready = await fetch(`http://${dp.adminAddress}/readyz`);
    expect(await ready.json()).toEqual({ status: "ready", version: 5, source: "control-plane" });
    const proxied = await fetch(`http://${dp.proxyAddress}/api/x`);
    expect(await proxied.text()).toBe("upstream saw /api/x");
    const metrics = await (await fetch(`http://${dp.adminAddress}/metrics`)).text();
    expect(metrics).toMatch(/^clawgate_snapshot_version 5$/m);
    expect(metrics).toMatch(/^clawgate_control_plane_connected 1$/m);
  });

  it("probes the snapshot's nodes, reports their health on the stream and in /metrics", async () => {
    const server = createServer((_req, res) => res.end("ok"));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    cleanup.push(() => server.close());
    const node = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    const cp = await controlPlane(node, {
      intervalMs: 50,
      timeoutMs: 40,
      unhealthyThreshold: 2,
      healthyThreshold: 2,
    });
    // The whole view goes right after the Hello (empty: no snapshot yet); the first report
    // with the node follows the applied snapshot: the node is watched, healthy.
    const healthy = new Promise<unknown>((resolve) =>
      cp.acks.on("health", (nodes: unknown[]) => {
        if (nodes.length > 0) resolve(nodes);
      }),
    );
    const dp = await startDataPlane(config([`--cp-addresses=${cp.address}`]));
    cleanup.push(() => dp.stop());
    expect(await healthy).toMatchObject([{ upstream: "agents", address: node, state: "healthy" }]);
    const metric = async () =>
      (await (await fetch(`http://${dp.adminAddress}/metrics`)).text()).match(
        new RegExp(
          `^clawgate_upstream_node_healthy\\{upstream="agents",node="${node}"\\} (\\d)$`,
          "m",
        ),
      )?.[1];
    expect(await metric()).toBe("1");

    // Nothing listens any more: two failed probes evict the node, and the CP is told.
    server.close();
    const evicted = await new Promise<unknown>((resolve) =>
      cp.acks.on("health", (nodes: { state: string }[]) => {
        if (nodes[0]?.state === "evicted") resolve(nodes[0]);
      }),
    );
    expect(evicted).toMatchObject({
      address: node,
      evidence: expect.stringContaining("ECONNREFUSED"),
    });
    expect(await metric()).toBe("0");
    // Requests fail fast while the only node is out.
    const reply = await fetch(`http://${dp.proxyAddress}/api/x`);
    expect(reply.status).toBe(503);
    expect(reply.headers.get("retry-after")).toBe("1");
    expect(((await reply.json()) as { error: { code: string } }).error.code).toBe(
      "CLAWGATE_NO_HEALTHY_NODE",
    );
  });

  it("serves /healthz but not /readyz while no control plane answers", async () => {
    const dp = await startDataPlane(config(["--cp-addresses=127.0.0.1:1"]));
    cleanup.push(() => dp.stop());
    expect((await fetch(`http://${dp.adminAddress}/healthz`)).status).toBe(200);
    expect((await fetch(`http://${dp.adminAddress}/readyz`)).status).toBe(503);
  });

  it("rejects with a ListenError naming the address and releases the other listener", async () => {
    const taken = createServer();
    taken.listen(0, "127.0.0.1");
    await once(taken, "listening");
    cleanup.push(() => taken.close());
    const address = `127.0.0.1:${(taken.address() as AddressInfo).port}`;

    const proxyAddress = await freeAddress();
    const err = await startDataPlane(
      config([`--proxy-listen=${proxyAddress}`, `--admin-listen=${address}`]),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ListenError);
    expect(err).toMatchObject({ code: "EADDRINUSE", address });
    // The proxy listener bound first; it must be closed again, not left behind.
    const probe = createServer();
    const [host, port] = proxyAddress.split(":");
    probe.listen(Number(port), host);
    await once(probe, "listening");
    probe.close();
  });

  it("during the drain delay: not ready, yet new connections are served; then refused", async () => {
    const cp = await controlPlane(await upstream());
    const acked = once(cp.acks, "ack");
    const dp = await startDataPlane(config([`--cp-addresses=${cp.address}`]));
    cleanup.push(() => dp.stop());
    await acked;

    const events: string[] = [];
    const stopped = dp.stop(1_000, 3_000).then(() => events.push("stopped"));
    // Inside the delay: not ready, still serving (each check takes a few ms of its 3 s).
    const readyz = await fetch(`http://${dp.adminAddress}/readyz`);
    expect(readyz.status).toBe(503);
    expect(await readyz.json()).toMatchObject({ reason: "draining: the process is stopping" });
    expect(await getOnNewConnection(dp.proxyAddress, "/api/during")).toEqual({
      status: 200,
      body: "upstream saw /api/during",
    });
    events.push("served during the delay");

    // The stop waited out the delay on its own, then the listener closed.
    await stopped;
    expect(events).toEqual(["served during the delay", "stopped"]);
    expect(await refused(dp.proxyAddress)).toBe(true);
  });

  it("skipDrainDelay() starts the drain at once", async () => {
    const cp = await controlPlane(await upstream());
    const acked = once(cp.acks, "ack");
    const dp = await startDataPlane(config([`--cp-addresses=${cp.address}`]));
    cleanup.push(() => dp.stop());
    await acked;

    expect(dp.skipDrainDelay()).toBe(false);
    const stopped = dp.stop(1_000, 600_000);
    expect((await fetch(`http://${dp.adminAddress}/readyz`)).status).toBe(503);
    expect((await getOnNewConnection(dp.proxyAddress, "/api/x")).status).toBe(200);
    expect(dp.skipDrainDelay()).toBe(true);
    await stopped;
    expect(await refused(dp.proxyAddress)).toBe(true);
  });

  it("stop() closes both listeners", async () => {
    const dp = await startDataPlane(config(["--cp-addresses=127.0.0.1:1"]));
    await dp.stop();
    await expect(fetch(`http://${dp.adminAddress}/healthz`)).rejects.toThrow();
    await expect(fetch(`http://${dp.proxyAddress}/`)).rejects.toThrow();
  });
});
