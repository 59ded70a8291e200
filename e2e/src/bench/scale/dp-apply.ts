import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { loadConfig, startDataPlane } from "@clawgate/data-plane";
import {
  create,
  type EncodedOrResponse,
  encodeResponse,
  type Route,
  RouteSchema,
  type Snapshot,
  SnapshotSchema,
  type StreamSnapshotsRequest,
  StreamSnapshotsResponseSchema,
  snapshotServiceDefinition,
  type Upstream,
  UpstreamSchema,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import { nodeAddress, routeShape, type ScaleSize, upstreamName } from "./scale-config.js";

/**
 * `node e2e/dist/bench/scale/dp-apply.js`: one data plane in this process, fed by a control
 * plane reduced to its stream (bytes encoded before the clock starts), so the event-loop
 * block measured is the data plane's own: a full snapshot at boot, then one-route changes,
 * sent as deltas when the data plane accepts them. Prints the longest block and the heap.
 * Sizes: CLAWGATE_BENCH_ROUTES, _UPSTREAMS, _NODES, _CHANGES (defaults issue 9's 10,000 /
 * 2,000 / 20,000 / 20).
 */
const size: ScaleSize = {
  routes: setting("ROUTES", 10_000),
  upstreams: setting("UPSTREAMS", 2_000),
  nodes: setting("NODES", 20_000),
};
const changes = setting("CHANGES", 20);

/** First byte of a StreamSnapshotsRequest holding a health report: field 4, length-delimited. */
const HEALTH_TAG = (4 << 3) | 2;

function setting(name: string, fallback: number): number {
  const raw = process.env[`CLAWGATE_BENCH_${name}`];
  return raw === undefined ? fallback : Number(raw);
}

function upstreams(): Upstream[] {
  const per = Math.max(1, Math.floor(size.nodes / size.upstreams));
  const list: Upstream[] = [];
  for (let u = 0; u < size.upstreams; u++) {
    const nodes = [];
    for (let j = 0; j < per; j++) nodes.push({ address: nodeAddress(u * per + j), weight: 1 });
    list.push(
      create(UpstreamSchema, {
        name: upstreamName(u),
        breaker: "default",
        nodes,
        healthCheck: { intervalMs: 3_600_000, timeoutMs: 1_000, unhealthyThreshold: 1 },
      }),
    );
  }
  return list;
}

function route(i: number, priority: number): Route {
  const shape = routeShape(i, size.upstreams);
  return create(RouteSchema, {
    name: shape.name,
    priority,
    match: { path: shape.path ?? "", pathPrefix: shape.pathPrefix ?? "", hosts: shape.hosts ?? [] },
    upstream: shape.upstream,
  });
}

async function main(): Promise<void> {
  const routes: Route[] = [];
  for (let i = 0; i < size.routes; i++) routes.push(route(i, 0));
  const full: Snapshot = create(SnapshotSchema, {
    version: 100n,
    nonce: "n100",
    createdAtMs: BigInt(Date.now()),
    breakers: [{ name: "default" }],
    upstreams: upstreams(),
    routes,
  });
  const fullBytes = encodeResponse(
    create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value: full } }),
  );
  const answers: { version: bigint; ok: boolean; detail: string }[] = [];
  const waiters: (() => void)[] = [];
  let stream: grpc.ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse> | undefined;
  let acceptsDeltas = false;
  const server = new grpc.Server({ "grpc.max_send_message_length": -1 });
  // Health reports are not decoded: this process measures the data plane's loop, and a
  // 20,000-node report decoded here would count against it.
  const definition = {
    streamSnapshots: {
      ...snapshotServiceDefinition.streamSnapshots,
      requestDeserialize: (bytes: Buffer) =>
        bytes[0] === HEALTH_TAG
          ? ({ message: { case: undefined } } as unknown as StreamSnapshotsRequest)
          : snapshotServiceDefinition.streamSnapshots.requestDeserialize(bytes),
    },
  };
  server.addService(definition, {
    streamSnapshots: (call: grpc.ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse>) => {
      call.on("error", () => {});
      call.on("data", (request: StreamSnapshotsRequest) => {
        const m = request.message;
        if (m.case === "hello") {
          stream = call;
          acceptsDeltas = (m.value as { acceptsDeltas?: boolean }).acceptsDeltas === true;
          call.write(fullBytes);
        } else if (m.case === "ack" || m.case === "nack") {
          const detail = m.case === "nack" ? m.value.errorDetail : "";
          answers.push({ version: m.value.version, ok: m.case === "ack", detail });
          for (const w of waiters.splice(0)) w();
        }
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  const answered = async (version: bigint) => {
    while (!answers.some((a) => a.version === version)) {
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
    const answer = answers.find((a) => a.version === version)!;
    if (!answer.ok) throw new Error(`version ${version} NACKed: ${answer.detail}`);
  };

  const cacheDir = mkdtempSync(join(tmpdir(), "dp-apply-"));
  const config = loadConfig({
    argv: [],
    env: {
      CLAWGATE_CP_ADDRESSES: `127.0.0.1:${port}`,
      CLAWGATE_PROXY_LISTEN: "127.0.0.1:0",
      CLAWGATE_DP_ADMIN_LISTEN: "127.0.0.1:0",
      CLAWGATE_CACHE_DIR: cacheDir,
      CLAWGATE_LOG_LEVEL: "warn",
      CLAWGATE_NODE_ID: "bench-dp",
    },
  });
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const dp = await startDataPlane(config);
  await answered(100n);
  const bootMs = delay.max / 1e6;
  // The boot's mass eviction: every node refuses, probes evict them in one burst.
  delay.reset();
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  const evictionMs = delay.max / 1e6;

  const blocks: number[] = [];
  for (let c = 1; c <= changes; c++) {
    const version = 100n + BigInt(c);
    const changed = route(c % size.routes, c);
    const message = acceptsDeltas
      ? create(StreamSnapshotsResponseSchema, {
          message: {
            case: "delta",
            value: {
              version,
              nonce: `n${version}`,
              baseVersion: version - 1n,
              createdAtMs: BigInt(Date.now()),
              routes: [changed],
            },
          },
        })
      : create(StreamSnapshotsResponseSchema, {
          message: {
            case: "snapshot",
            value: {
              ...full,
              version,
              nonce: `n${version}`,
              routes: full.routes.map((r, i) => (i === c % size.routes ? changed : r)),
            },
          },
        });
    const bytes = encodeResponse(message);
    await new Promise((resolve) => setTimeout(resolve, 50));
    delay.reset();
    stream!.write(bytes);
    await answered(version);
    blocks.push(delay.max / 1e6);
  }
  blocks.sort((a, b) => a - b);
  // A whole snapshot while serving (what a reconnect brings): every resource arrives anew.
  const againVersion = 100n + BigInt(changes) + 1n;
  const again = encodeResponse(
    create(StreamSnapshotsResponseSchema, {
      message: {
        case: "snapshot",
        value: { ...full, version: againVersion, nonce: `n${againVersion}` },
      },
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 50));
  delay.reset();
  stream!.write(again);
  await answered(againVersion);
  const fullAgainMs = delay.max / 1e6;
  global.gc?.();
  const heapMiB = process.memoryUsage().heapUsed / 2 ** 20;
  console.log(
    JSON.stringify({
      size,
      acceptsDeltas,
      fullSnapshotBytes: fullBytes.byteLength,
      bootBlockMs: bootMs,
      fullWhileServingBlockMs: fullAgainMs,
      evictionBlockMs: evictionMs,
      changeBlockMs: {
        p50: blocks[Math.floor(blocks.length / 2)],
        max: blocks[blocks.length - 1],
      },
      heapMiB: Math.round(heapMiB),
    }),
  );
  await dp.stop();
  server.forceShutdown();
  rmSync(cacheDir, { recursive: true, force: true });
}

await main();
