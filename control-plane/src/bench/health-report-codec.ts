import { monitorEventLoopDelay } from "node:perf_hooks";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { evictedNodes } from "../testing/evicted-nodes.js";

/**
 * How long encoding and reading back one large shared health report blocks the event loop:
 * a data plane that routes to 20,000 nodes, all evicted (a rack gone), as bench:scale drives
 * it. Measures and prints; asserts nothing.
 *
 *   node control-plane/dist/bench/health-report-codec.js [nodes] [rounds] [codec module]
 *
 * The codec module defaults to this build's stored-health-report.js; pass another build's to
 * compare (its encode and parse may answer values or promises).
 */
interface Codec {
  encodeHealthReport(report: {
    replica: string;
    reportedAtMs: number;
    nodes: readonly ReportedNodeHealth[];
  }): string | Promise<string>;
  parseHealthReport(dataPlane: string, value: string): unknown;
}

const nodeCount = Number(process.argv[2] ?? 20_000);
const rounds = Number(process.argv[3] ?? 20);
const codecPath =
  process.argv[4] ?? new URL("../health/stored-health-report.js", import.meta.url).href;

const nodes = evictedNodes(nodeCount);

const codec = (await import(codecPath)) as Codec;
const histogram = monitorEventLoopDelay({ resolution: 1 });
/** A timer that should fire every millisecond: its longest lateness is the longest block. */
let longestGapMs = 0;
let last = performance.now();
const ticker = setInterval(() => {
  const now = performance.now();
  longestGapMs = Math.max(longestGapMs, now - last);
  last = now;
}, 1);

// Warm up (JIT, zlib's pool) before measuring.
await codec.parseHealthReport("dp-1", await codec.encodeHealthReport(report(0)));
histogram.enable();
last = performance.now();
longestGapMs = 0;
for (let round = 1; round <= rounds; round++) {
  const value = await codec.encodeHealthReport(report(round));
  await codec.parseHealthReport("dp-1", value);
  // Yield a turn between rounds, as reports from separate data planes would arrive.
  await new Promise((resolve) => setImmediate(resolve));
}
histogram.disable();
clearInterval(ticker);

const ms = (nanoseconds: number) => (nanoseconds / 1e6).toFixed(1);
console.log(`codec: ${codecPath}`);
console.log(`${rounds} rounds of encode + parse of a ${nodeCount}-node report`);
console.log(
  `event-loop delay (monitorEventLoopDelay): p50 ${ms(histogram.percentile(50))} ms, p99 ${ms(histogram.percentile(99))} ms, max ${ms(histogram.max)} ms`,
);
console.log(`longest gap of a 1 ms timer: ${longestGapMs.toFixed(1)} ms`);

function report(round: number) {
  return { replica: "cp-1", reportedAtMs: 1_764_547_200_000 + round, nodes };
}
