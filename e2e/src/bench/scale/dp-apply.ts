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
 * sent as deltas when the data plane accepts them. Prints the longest block, the heap, and
 * the CPU per one-route change: process.cpuUsage from sending it until the data plane has
 * ACKed it and written it to its disk cache (written at once here, not coalesced), beside
 * what the process spends per second with no change (idlePerSecondMs). netOfIdleP50 takes
 * off each change's CPU what the process spent in an equally long window right after it.
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

function cpuMs(usage: NodeJS.CpuUsage): number {
  return (usage.user + usage.system) / 1000;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** Resolves waiters once a version at or above theirs is reached. */
class Waiters {
  #reached = 0;
  readonly #waiting: { version: number; resolve: () => void }[] = [];

  reached(version: number): void {
    this.#reached = Math.max(this.#reached, version);
    for (const waiter of this.#waiting.splice(0)) {
      if (waiter.version <= this.#reached) waiter.resolve();
      else this.#waiting.push(waiter);
    }
  }

  wait(version: number): Promise<void> {
    if (version <= this.#reached) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push({ version, resolve }));
  }
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
  // Versions on disk, so a change is measured until its cache write is done too.
  const saved = new Waiters();
  // No coalescing window: each change is written at once, so its measured CPU spans only its
  // own work (a window of 2 s would add that long of whatever else the process does).
  const dp = await startDataPlane(config, {
    onCacheSaved: (version) => saved.reached(version),
    cacheSaveDelayMs: 0,
  });
  await answered(100n);
  const bootMs = delay.max / 1e6;
  // The boot's mass eviction: every node refuses, probes evict them in one burst.
  delay.reset();
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  const evictionMs = delay.max / 1e6;

  // What the process spends meanwhile on other things (the eviction burst's tail, timers), per
  // second: the floor under each change's CPU below, measured over the change's own window.
  const idleFrom = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const idleCpuMs = cpuMs(process.cpuUsage(idleFrom));

  const blocks: number[] = [];
  const cpu: number[] = [];
  const net: number[] = [];
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
    const from = process.cpuUsage();
    const fromMs = performance.now();
    cp.write(bytes);
    await answered(version);
    blocks.push(delay.max / 1e6);
    // The change's whole cost: decode, compile, swap, the steps after it, the cache write.
    await saved.wait(Number(version));
    const used = cpuMs(process.cpuUsage(from));
    cpu.push(used);
    // Less what the rest of the process (the boot's eviction tail, probes on their thread,
    // health reports) spends in a window as long right after, with no change.
    const quietFrom = process.cpuUsage();
    await new Promise((resolve) => setTimeout(resolve, performance.now() - fromMs));
    net.push(used - cpuMs(process.cpuUsage(quietFrom)));
  }
  blocks.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  net.sort((a, b) => a - b);
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
  const memory = process.memoryUsage();
  const heapMiB = memory.heapUsed / 2 ** 20;
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
      cpuPerChangeMs: {
        p50: round(cpu[Math.floor(cpu.length / 2)]!),
        max: round(cpu[cpu.length - 1]!),
        netOfIdleP50: round(net[Math.floor(net.length / 2)]!),
        idlePerSecondMs: round(idleCpuMs),
      },
      heapMiB: Math.round(heapMiB),
      // Resident set after the same collection: heap, code, buffers, the probe worker's isolate.
      rssMiB: Math.round(memory.rss / 2 ** 20),
    }),
  );
  await dp.stop();
  cp.close();
  rmSync(cacheDir, { recursive: true, force: true });
}

await main();
