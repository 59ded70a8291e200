import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { loadConfig, startDataPlane } from "@clawgate/data-plane";
import { create, encodeResponse, StreamSnapshotsResponseSchema } from "@clawgate/proto";
import type { ScaleSize } from "./scale-config.js";
import { scaleRoute, scaleSnapshot, startStubControlPlane } from "./stub-control-plane.js";

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

function setting(name: string, fallback: number): number {
  const raw = process.env[`CLAWGATE_BENCH_${name}`];
  return raw === undefined ? fallback : Number(raw);
}

async function main(): Promise<void> {
  const full = scaleSnapshot(size, 1);
  const fullBytes = encodeResponse(
    create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value: full } }),
  );
  const cp = await startStubControlPlane(full);
  const route = (i: number, priority: number) => scaleRoute(size, i, priority);
  const answered = cp.answered;

  const cacheDir = mkdtempSync(join(tmpdir(), "dp-apply-"));
  const config = loadConfig({
    argv: [],
    env: {
      CLAWGATE_CP_ADDRESSES: cp.address,
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
    const message = cp.acceptsDeltas()
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
    cp.write(bytes);
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
  cp.write(again);
  await answered(againVersion);
  const fullAgainMs = delay.max / 1e6;
  global.gc?.();
  const heapMiB = process.memoryUsage().heapUsed / 2 ** 20;
  console.log(
    JSON.stringify({
      size,
      acceptsDeltas: cp.acceptsDeltas(),
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
  cp.close();
  rmSync(cacheDir, { recursive: true, force: true });
}

await main();
