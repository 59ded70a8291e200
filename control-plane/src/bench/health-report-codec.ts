import { monitorEventLoopDelay } from "node:perf_hooks";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
import { watchLongestGap } from "./longest-gap.js";

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
const ms = (nanoseconds: number) => (nanoseconds / 1e6).toFixed(1);
console.log(`codec: ${codecPath}`);
console.log(`${rounds} rounds of a ${nodeCount}-node report, each phase measured on its own`);

// Warm up (JIT, zlib's pool) before measuring.
const stored = await codec.encodeHealthReport(report(0));
await codec.parseHealthReport("dp-1", stored);
await measure("encode (JSON, deflate)", (round) => codec.encodeHealthReport(report(round)));
await measure("parse (inflate, JSON, schema)", () => codec.parseHealthReport("dp-1", stored));

/** Runs `step` `rounds` times and prints how long the event loop was blocked meanwhile. */
async function measure(phase: string, step: (round: number) => unknown): Promise<void> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  const gap = watchLongestGap();
  histogram.enable();
  for (let round = 1; round <= rounds; round++) {
    await step(round);
    // Yield a turn between rounds, as reports from separate data planes would arrive.
    await new Promise((resolve) => setImmediate(resolve));
  }
  histogram.disable();
  const longestGapMs = gap.stop();
  console.log(
    `${phase}: event-loop delay p50 ${ms(histogram.percentile(50))} ms, p99 ${ms(histogram.percentile(99))} ms, max ${ms(histogram.max)} ms; longest 1 ms timer gap ${longestGapMs.toFixed(1)} ms`,
  );
}

function report(round: number) {
  return { replica: "cp-1", reportedAtMs: 1_764_547_200_000 + round, nodes };
}
