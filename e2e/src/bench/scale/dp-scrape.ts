import { startDataPlane } from "../../support/data-plane-process.js";
import { metricValue } from "../../support/metrics-text.js";
import type { ScaleSize } from "./scale-config.js";
import { scaleSnapshot, startStubControlPlane } from "./stub-control-plane.js";

/**
 * `node e2e/dist/bench/scale/dp-scrape.js`: what one `/metrics` scrape costs a data plane
 * holding issue 9's 20,000 nodes (every one refusing, so each has a healthy series and a
 * failures series). A real clawgate-data-plane process is fed by a stub control plane; once it
 * ACKed and settled, each round reads the event-loop lag (which resets it), scrapes the whole
 * /metrics, then reads the lag again: that second read holds the block the scrape caused,
 * since the block is recorded after the turn that rendered the scrape. An equal window with no
 * scrape comes first, for the block a loaded machine shows anyway. Prints the round trip and
 * both blocks per build. With CLAWGATE_BENCH_BEFORE_BIN (another build's
 * clawgate-data-plane.js) a second data plane runs it, its rounds interleaved with this
 * build's, so both are measured side by side on the same (loaded) machine.
 * Environment: CLAWGATE_BENCH_ROUTES, _UPSTREAMS, _NODES (issue 9's sizes by default),
 * _ROUNDS (20), _SETTLE_MS (5000), _BEFORE_BIN (unset).
 */
const size: ScaleSize = {
  routes: setting("ROUTES", 10_000),
  upstreams: setting("UPSTREAMS", 2_000),
  nodes: setting("NODES", 20_000),
};
const rounds = setting("ROUNDS", 20);
const settleMs = setting("SETTLE_MS", 5_000);
const beforeBin = process.env.CLAWGATE_BENCH_BEFORE_BIN;
/** The event-loop lag alone: a build that ignores the filter renders everything instead. */
const LAG_PATH = "/metrics?name=nodejs_eventloop_lag_max_seconds";

function setting(name: string, fallback: number): number {
  const raw = process.env[`CLAWGATE_BENCH_${name}`];
  return raw === undefined ? fallback : Number(raw);
}

interface Measured {
  build: string;
  adminUrl: string;
  scrapeMs: number[];
  blockMs: number[];
  idleBlockMs: number[];
  bytes: number;
}

async function get(url: string): Promise<string> {
  const response = await fetch(url, { signal: AbortSignal.timeout(60_000) });
  return response.text();
}

/** The longest block since the last read, in ms (the read resets it). */
async function lagMs(m: Measured): Promise<number> {
  const text = await get(`${m.adminUrl}${LAG_PATH}`);
  return (metricValue(text, "nodejs_eventloop_lag_max_seconds") ?? Number.NaN) * 1000;
}

async function round(m: Measured): Promise<void> {
  await lagMs(m);
  // The same window with no scrape: what a loaded machine alone shows as block.
  await new Promise((resolve) => setTimeout(resolve, 100));
  m.idleBlockMs.push(await lagMs(m));
  const startedAt = performance.now();
  const text = await get(`${m.adminUrl}/metrics`);
  m.scrapeMs.push(performance.now() - startedAt);
  m.bytes = text.length;
  // A few timer turns pass so the block the scrape caused is recorded before it is read.
  await new Promise((resolve) => setTimeout(resolve, 100));
  const lag = metricValue(
    await get(`${m.adminUrl}${LAG_PATH}`),
    "nodejs_eventloop_lag_max_seconds",
  );
  m.blockMs.push((lag ?? Number.NaN) * 1000);
}

function summary(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
  return `p50 ${at(0.5).toFixed(1)} ms, max ${at(1).toFixed(1)} ms`;
}

async function main(): Promise<void> {
  const full = scaleSnapshot(size, 2);
  const builds =
    beforeBin === undefined
      ? [["this build", undefined]]
      : [
          ["before", beforeBin],
          ["this build", undefined],
        ];
  const stops: (() => Promise<void>)[] = [];
  const measured: Measured[] = [];
  try {
    for (const [build, bin] of builds) {
      const cp = await startStubControlPlane(full);
      stops.push(async () => cp.close());
      const dp = await startDataPlane(
        { CLAWGATE_CP_ADDRESSES: cp.address, CLAWGATE_LOG_LEVEL: "warn" },
        { waitUntil: "none", ...(bin === undefined ? {} : { bin }) },
      );
      stops.push(() => dp.stop());
      await cp.answered(full.version);
      measured.push({
        build: build!,
        adminUrl: dp.adminUrl,
        scrapeMs: [],
        blockMs: [],
        idleBlockMs: [],
        bytes: 0,
      });
    }
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    for (let r = 0; r < rounds; r++) for (const m of measured) await round(m);
    for (const m of measured) {
      console.log(
        JSON.stringify({
          size,
          build: m.build,
          metricsBytes: m.bytes,
          scrapeRoundTrip: summary(m.scrapeMs),
          blockPerScrape: summary(m.blockMs),
          blockIdleWindow: summary(m.idleBlockMs),
        }),
      );
    }
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
}

await main();
