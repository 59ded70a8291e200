import { cpus } from "node:os";
import { startEtcd } from "@clawgate/control-plane/testing";
import { type ControlPlane, startControlPlane } from "../../support/control-plane-process.js";
import { type DataPlane, startDataPlane } from "../../support/data-plane-process.js";
import { metricValue } from "../../support/metrics-text.js";
import { Teardown } from "../../support/teardown.js";
import { waitFor } from "../../support/wait-for.js";
import { mainThreadSched, schedBetween, type ThreadSched } from "../main-thread-sched.js";
import { residentMiB } from "../process-usage.js";
import { type ThreadCpu, threadCpu } from "../thread-cpu.js";
import { AppliedVersions } from "./applied-versions.js";
import { applyResources } from "./apply-resources.js";
import { measureDataPlaneAlone } from "./data-plane-alone.js";
import { measureLateDataPlane } from "./late-data-plane.js";
import { measureRouteMatch, type RouteMatchResult } from "./route-match.js";
import {
  routeShape,
  routeSpec,
  type ScaleSize,
  scaleResources,
  upstreamName,
} from "./scale-config.js";
import { formatScaleReport, type ScaleRow } from "./scale-report.js";
import { SimulatedStreams } from "./simulated-streams.js";
import { startBlockMs } from "./start-block.js";

/**
 * `npm run bench:scale`: the config path at issue 9's scale. Real etcd, one control plane on
 * it, real data planes, and a few hundred simulated data-plane streams; it applies 10,000
 * routes, 2,000 upstreams and 20,000 nodes, then times one-route changes end to end and
 * prints every figure in one table. Bytes on the wire per one-route change are measured twice,
 * on a config a twentieth of that size first and on the whole one, to show they do not grow
 * with the config. It measures and reports; it asserts nothing. Every
 * process it starts is stopped by its PID, also on Ctrl-C or when CLAWGATE_BENCH_TIMEOUT_MS
 * runs out.
 *
 * Environment (full size by default; CLAWGATE_BENCH_SIZE=small for a quick run):
 * CLAWGATE_BENCH_ROUTES, _UPSTREAMS, _NODES, _DATAPLANES (real ones), _STREAMS (simulated),
 * _CHANGES (one-route changes timed on the data planes), _STREAM_CHANGES (on the simulated
 * streams), _BATCH (resources per POST /v1/apply after one apply of everything fails,
 * halved until one goes through), _TIMEOUT_MS (the whole run), _DP_BIN (another build's
 * clawgate-data-plane.js for the real data planes, to compare builds; default this one's),
 * _CPU_PROF_DIR (unset; a directory: the control plane and the real data planes run with
 * --cpu-prof and write a profile per thread there when they stop), _NODE_ARGS (unset; more node
 * options for the control plane and the real data planes, space-separated, e.g. --trace-gc-nvp
 * with E2E_VERBOSE=1 to see each collection's pause beside the data planes' log lines).
 */
const small = process.env.CLAWGATE_BENCH_SIZE === "small";
const size: ScaleSize = {
  routes: setting("ROUTES", small ? 100 : 10_000),
  upstreams: setting("UPSTREAMS", small ? 20 : 2_000),
  nodes: setting("NODES", small ? 200 : 20_000),
};
const dataPlaneCount = setting("DATAPLANES", small ? 2 : 10);
const streamCount = setting("STREAMS", small ? 20 : 200);
const changes = setting("CHANGES", small ? 10 : 50);
const streamChanges = setting("STREAM_CHANGES", small ? 5 : 10);
const batchSize = setting("BATCH", 1_000);
const dpBin = process.env.CLAWGATE_BENCH_DP_BIN || undefined;
const profileDir = process.env.CLAWGATE_BENCH_CPU_PROF_DIR || undefined;
/** Node options of the processes measured: a CPU profile each, and any given, when asked. */
const nodeArgs = [
  ...(profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profileDir}`]),
  ...(process.env.CLAWGATE_BENCH_NODE_ARGS?.split(" ").filter((arg) => arg !== "") ?? []),
];
/** Streams and one-route changes that measure bytes on the wire at each config size. */
const BYTE_STREAMS = 5;
const BYTE_CHANGES = 5;
const timeoutMs = setting("TIMEOUT_MS", small ? 180_000 : 1_800_000);
/** The event-loop block since the last read of it (each read starts a new window). */
const LAG = "nodejs_eventloop_lag_max_seconds";
/** Whole /metrics scrapes per data plane whose block is measured. */
const SCRAPES = 3;
/** How long the data plane started while the fleet serves is watched after it applied. */
const LATE_AFTER_MS = 10_000;
/** Longest wait for one step (an apply, a snapshot reaching everyone). */
const STEP_MS = small ? 60_000 : 300_000;

async function main(): Promise<void> {
  const teardown = new Teardown();
  const stopAll = (why: string, code: number) => {
    process.stderr.write(`\nbench:scale: ${why}: stopping everything\n`);
    void teardown.run().finally(() => process.exit(code));
  };
  process.once("SIGINT", () => stopAll("interrupted", 130));
  process.once("SIGTERM", () => stopAll("terminated", 143));
  const deadline = setTimeout(() => stopAll(`over ${timeoutMs} ms`, 124), timeoutMs);
  const rows: ScaleRow[] = [];
  const row = (figure: string, value: string, target = "") => {
    rows.push({ figure, value: value.length > 110 ? `${value.slice(0, 107)}...` : value, target });
    log(`${figure}: ${value}`);
  };
  try {
    log(
      `${size.routes} routes, ${size.upstreams} upstreams, ${size.nodes} nodes; ${dataPlaneCount} data planes, ${streamCount} simulated streams; ${cpus().length} cores, node ${process.version}`,
    );

    const [matchSmall, matchLarge] = measureRouteMatch([10, size.routes]) as [
      RouteMatchResult,
      RouteMatchResult,
    ];
    row("route match, 10 routes", `${matchSmall.nsPerMatch.toFixed(0)} ns`);
    row(`route match, ${size.routes} routes`, `${matchLarge.nsPerMatch.toFixed(0)} ns`);
    row(
      "route match ratio",
      `${(matchLarge.nsPerMatch / matchSmall.nsPerMatch).toFixed(2)}x`,
      "< 1.2x",
    );

    const etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    const cp = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_LOG_LEVEL: "info" },
      { nodeArgs },
    );
    teardown.add("control plane", () => cp.stop());
    log(`etcd pid ${etcd.pid}, control plane pid ${cp.process.pid}`);
    let refusedStreamMessages = 0;
    cp.process.output.onLine((line) => {
      if (line.includes("refusing a stream message over its size limit")) refusedStreamMessages++;
    });

    // A twentieth of the config first, to measure what a change costs on the wire at that size.
    const twentieth = (n: number) => Math.max(1, Math.floor(n / 20));
    const smallSize = {
      routes: twentieth(size.routes),
      upstreams: twentieth(size.upstreams),
      nodes: twentieth(size.nodes),
    };
    const smallConfig = scaleResources(smallSize);
    const smallApplied = await applyResources(
      cp,
      [...smallConfig.upstreams, ...smallConfig.routes],
      batchSize,
      STEP_MS,
    );
    if (!smallApplied.ok) throw new Error(`the small config was refused: ${smallApplied.reason}`);
    await waitForPublished(cp, smallApplied.revision);
    await measureChangeBytes(
      cp,
      `${smallSize.routes} routes, ${smallSize.upstreams} upstreams`,
      row,
    );

    // Apply: everything in one transaction first, as the issue asks; batches when refused.
    const { upstreams, routes } = scaleResources(size);
    const everything = [...upstreams, ...routes];
    let applied = await applyResources(cp, everything, everything.length, STEP_MS);
    row(
      `one apply of ${everything.length} resources`,
      applied.ok ? `${ms(applied.ms)}` : `refused after ${ms(applied.ms)}: ${applied.reason}`,
      "succeeds",
    );
    // Halving until a batch goes through finds the limit in force (an apply is an upsert, so
    // batches a refused attempt already wrote are merely written again).
    // A refusal after some batches went through is a limit on the whole config, not on one
    // batch: smaller batches would meet it too.
    for (
      let batch = batchSize;
      !applied.ok && applied.batches === 0 && batch >= 1;
      batch = Math.floor(batch / 2)
    ) {
      applied = await applyResources(cp, everything, batch, STEP_MS);
      // The control plane's etcd client stops calling etcd for a while after failures; a
      // refusal then says nothing about this batch size, so it is tried again once that ends.
      for (let retry = 0; !applied.ok && /circuit breaker is open/.test(applied.reason); retry++) {
        if (retry === 60) break;
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        applied = await applyResources(cp, everything, batch, STEP_MS);
      }
      row(
        `apply in batches of ${batch}`,
        applied.ok
          ? `${ms(applied.ms)} (${applied.batches} batches)`
          : `refused after ${ms(applied.ms)}: ${applied.reason}`,
      );
    }
    // When only part of it went in, the rest is measured at what the control plane published.
    if (!applied.ok && applied.batches === 0) {
      throw new Error(`the config could not be applied: ${applied.reason}`);
    }
    const atLeast = applied.ok ? applied.revision : 1;
    const published = await waitForPublished(cp, atLeast);
    const version = published.publishedVersion ?? published.version;
    row(
      "config measured below",
      `${JSON.stringify(published.counts)} at version ${version}`,
      applied.ok ? "" : "all of it",
    );

    // Data planes start after the apply: each gets the whole config as its first snapshot.
    const dataPlanes: DataPlane[] = [];
    const startedAt: number[] = [];
    for (let i = 0; i < dataPlaneCount; i++) {
      startedAt.push(Date.now());
      const dp = await startDataPlane(
        { CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_LOG_LEVEL: "info" },
        { waitUntil: "none", nodeArgs, ...(dpBin === undefined ? {} : { bin: dpBin }) },
      );
      teardown.add(`data plane ${i}`, () => dp.stop());
      dataPlanes.push(dp);
    }
    const appliedVersions = new AppliedVersions(dataPlanes);
    // Read as each one listens: the longest block of its start, apart from the snapshot's.
    const startBlocks = Promise.all(dataPlanes.map((dp) => startBlockMs(dp, STEP_MS)));
    // Awaited below; a failure meanwhile must not count as an unhandled rejection.
    startBlocks.catch(() => {});
    const firstApplied = await appliedVersions.waitAll(version, STEP_MS);
    const bootCpu = dataPlanes.map((dp) => threadCpu(dp.process.pid));
    const boot = firstApplied.map((at, i) => at - startedAt[i]!);
    row(
      `DP start to full snapshot applied (${dataPlaneCount} DPs at once)`,
      `p50 ${ms(percentile(boot, 0.5))}, max ${ms(Math.max(...boot))}`,
    );
    // From listening on: its boot and the full snapshot (the histogram resets per scrape).
    const started = await startBlocks;
    const bootLag = await scrapeAll(dataPlanes, LAG);
    row("DP event-loop block, boot + full snapshot", `max ${secondsAsMs(bootLag)}`, "< 250 ms");
    row("DP event-loop block, process start before listening", `max ${ms(Math.max(...started))}`);
    row("DP CPU, start until all applied (per DP, p50)", cpuText(bootCpu));

    // A change at once, while the control plane is still taking in the data planes' first
    // health reports (10 x 20,000 nodes): reported apart, as what a change costs during a fleet
    // boot. Then the timed changes start once every data plane's view is in the fleet's.
    await measureFirstChange(cp, appliedVersions, row).catch((error: unknown) =>
      row("first change after boot stopped", firstLine(error), "succeed"),
    );
    await waitForFleetHealth(cp, dataPlaneCount, row);

    // One-route changes reaching the real data planes. A refused change is reported, and
    // what needs no change is still measured.
    await measureChanges(cp, dataPlanes, appliedVersions, row).catch((error: unknown) =>
      row("one-route changes stopped", firstLine(error), "succeed"),
    );
    await measureScrapes(dataPlanes, row);

    // One more data plane while the fleet serves (a restart, a scale-up): the boot target's case.
    const late = await measureLateDataPlane({
      cpAddress: cp.grpcAddress,
      version: (await cp.admin.snapshot()).version,
      nodeArgs,
      bin: dpBin,
      timeoutMs: STEP_MS,
      afterMs: LATE_AFTER_MS,
    });
    row(
      "one more DP while the fleet serves: start to full snapshot applied",
      ms(late.appliedAfterMs),
    );
    row(
      "  its event-loop block, boot + full snapshot",
      `${ms(late.bootBlockMs)} (before listening ${ms(late.startBlockMs)})`,
      "< 250 ms",
    );
    row(
      `  its event-loop block, ${LATE_AFTER_MS / 1000} s after (no change, no scrape)`,
      ms(late.afterBlockMs),
      "< 20 ms",
    );
    row("  its CPU, start to applied", cpuText([late.cpuAtApplied]));
    row(`  its CPU, start to ${LATE_AFTER_MS / 1000} s after`, cpuText([late.cpuAfter]));

    const heap = await scrapeAll(dataPlanes, "nodejs_heap_size_used_bytes");
    row("DP heap used", `max ${bytes(Math.max(...heap))}`, "< 512 MB");
    const rss = dataPlanes.map((dp) => residentMiB([dp.process.pid]));
    row("DP resident memory", `max ${Math.max(...rss).toFixed(0)} MiB`);

    // Simulated data planes: how one control plane copes with many streams.
    const full = new SimulatedStreams(cp.grpcAddress, 1, 0, "full-snapshot");
    const helloAt = Date.now();
    let fullAt: number | undefined;
    full.onArrival((arrival) => {
      fullAt ??= arrival.atMs;
    });
    const fullArrival = await waitFor(() => fullAt, {
      what: "a new stream to receive the full snapshot",
      timeoutMs: STEP_MS,
      intervalMs: 2,
    }).finally(() => full.close());
    row("full snapshot over a new stream (Hello to last byte)", ms(fullArrival - helloAt));

    const counts = published.counts as { routes?: number; upstreams?: number };
    await measureChangeBytes(
      cp,
      `${counts.routes} routes, ${counts.upstreams} upstreams`,
      row,
    ).catch((error: unknown) => row("bytes per change stopped", firstLine(error), "succeed"));
    await measureStreams(cp, appliedVersions, teardown, row).catch((error: unknown) =>
      row("simulated-stream changes stopped", firstLine(error), "succeed"),
    );
    row("stream messages the CP refused as over a size limit", String(refusedStreamMessages), "0");
    clearTimeout(deadline);
  } catch (error) {
    row(
      "benchmark stopped",
      error instanceof Error ? error.message.split("\n")[0]! : String(error),
    );
    process.exitCode = 1;
  } finally {
    clearTimeout(deadline);
    await teardown.run();
    // With the fleet stopped, the cores are free for one data plane alone.
    await measureDataPlaneAlone(
      {
        ...process.env,
        CLAWGATE_BENCH_ROUTES: String(size.routes),
        CLAWGATE_BENCH_UPSTREAMS: String(size.upstreams),
        CLAWGATE_BENCH_NODES: String(size.nodes),
      },
      STEP_MS,
    ).then(
      (alone) => {
        row(
          "one DP alone (stub CP, no other process): block, boot + full snapshot",
          ms(alone.bootBlockMs),
          "< 250 ms",
        );
        row(
          "  its block, a full snapshot while serving",
          ms(alone.fullWhileServingBlockMs),
          "< 250 ms",
        );
        row("  its block, every node evicted in one burst", ms(alone.evictionBlockMs));
        row(
          "  its block, one-route change",
          `p50 ${alone.changeBlockMs.p50.toFixed(1)} ms, max ${alone.changeBlockMs.max.toFixed(1)} ms`,
          "< 20 ms",
        );
        row("  its heap used", `${alone.heapMiB} MiB`, "< 512 MB");
      },
      (error: unknown) => row("one DP alone stopped", firstLine(error), "succeed"),
    );
    process.stdout.write(`\n${formatScaleReport(rows)}\n\n`);
  }
}

type Row = (figure: string, value: string, target?: string) => void;

/** One-route changes timed to every real data plane, with their event-loop block and bytes. */
async function measureChanges(
  cp: ControlPlane,
  dataPlanes: DataPlane[],
  appliedVersions: AppliedVersions,
  row: Row,
): Promise<void> {
  const bytesBefore = await cpMetric(cp, "clawgate_snapshot_bytes_sent_total");
  // A witness: one simulated stream in this process, so each change's latency splits into the
  // control plane's part (write to the delta on the wire) and the data planes' (wire to applied).
  const status = await cp.admin.snapshot();
  const witness = new SimulatedStreams(
    cp.grpcAddress,
    1,
    status.publishedVersion ?? status.version,
    "witness",
  );
  const witnessed = new Map<number, number>();
  witness.onArrival((arrival) => {
    if (!witnessed.has(arrival.version)) witnessed.set(arrival.version, arrival.atMs);
  });
  const changeLatencies: number[] = [];
  const controlPlaneLatencies: number[] = [];
  const dataPlaneLatencies: number[] = [];
  const slowest = { ms: -1, change: 0, dataPlane: 0, controlPlaneMs: 0 };
  const changeLags: number[] = [];
  const idleLags: number[] = [];
  const applyTimes: number[] = [];
  // Each DP's main-thread scheduler counts over each window, in the order of the lags above:
  // read as each DP answers the scrape that starts or ends its window.
  const changeSched: (ThreadSched | undefined)[] = [];
  const idleSched: (ThreadSched | undefined)[] = [];
  const windowStart: (ThreadSched | undefined)[] = [];
  const startWindow = (i: number) => {
    windowStart[i] = mainThreadSched(dataPlanes[i]!.process.pid);
  };
  const endWindow = (into: (ThreadSched | undefined)[]) => (i: number) => {
    const now = mainThreadSched(dataPlanes[i]!.process.pid);
    into.push(schedBetween(windowStart[i], now));
    windowStart[i] = now;
  };
  try {
    await waitFor(
      async () =>
        (await cp.admin.dataplanes()).some((d) => d.nodeId === "witness-0" && d.state === "SYNCED"),
      { what: "the witness stream to be SYNCED", timeoutMs: STEP_MS, intervalMs: 20 },
    );
    for (let k = 1; k <= changes; k++) {
      // Resets the lag histograms; then a quiet window as long as a change, for the baseline.
      await scrapeAll(dataPlanes, LAG, startWindow);
      await new Promise((resolve) => setTimeout(resolve, 200));
      // Its read starts the change's window too.
      idleLags.push(...(await scrapeAll(dataPlanes, LAG, endWindow(idleSched))));
      const revision = await changeOneRoute(cp, k);
      const sentAt = revision.sentAt;
      const times = await appliedVersions.waitAll(revision.revision, STEP_MS);
      const onWire = await waitFor(() => witnessed.get(revision.revision), {
        what: `the witness stream to receive version ${revision.revision}`,
        timeoutMs: STEP_MS,
        intervalMs: 2,
      });
      controlPlaneLatencies.push(onWire - sentAt);
      applyTimes.push(...appliedVersions.applyMs(revision.revision));
      for (const [i, at] of times.entries()) {
        changeLatencies.push(at - sentAt);
        dataPlaneLatencies.push(at - onWire);
        if (at - sentAt > slowest.ms) {
          Object.assign(slowest, {
            ms: at - sentAt,
            change: k,
            dataPlane: i,
            controlPlaneMs: onWire - sentAt,
          });
        }
      }
      changeLags.push(...(await scrapeAll(dataPlanes, LAG, endWindow(changeSched))));
    }
  } finally {
    witness.close();
  }
  log(`write to delta on the wire, change by change: ${controlPlaneLatencies.join(" ")} ms`);
  // Which idle windows block: the first ones after boot, or any of them.
  const perChange = (lags: number[]) =>
    Array.from({ length: changes }, (_, k) =>
      Math.round(
        1000 * Math.max(...lags.slice(k * dataPlanes.length, (k + 1) * dataPlanes.length)),
      ),
    ).join(" ");
  log(`DP idle-window block, longest of the DPs, change by change: ${perChange(idleLags)} ms`);
  log(`DP change block, longest of the DPs, change by change: ${perChange(changeLags)} ms`);
  const bytesAfter = await cpMetric(cp, "clawgate_snapshot_bytes_sent_total");
  row(
    `one-route change to ${dataPlaneCount} DPs applied (${changes} changes)`,
    `p50 ${ms(percentile(changeLatencies, 0.5))}, p99 ${ms(percentile(changeLatencies, 0.99))}`,
    "p99 < 100 ms",
  );
  row(
    "  of which: write to delta on the wire (witness stream)",
    `p50 ${ms(percentile(controlPlaneLatencies, 0.5))}, p99 ${ms(percentile(controlPlaneLatencies, 0.99))}`,
  );
  row(
    "  of which: delta on the wire to applied (per DP)",
    `p50 ${ms(percentile(dataPlaneLatencies, 0.5))}, p99 ${ms(percentile(dataPlaneLatencies, 0.99))}`,
  );
  row(
    "  slowest one",
    `${ms(slowest.ms)}: change ${slowest.change}, DP ${slowest.dataPlane}, on the wire after ${ms(slowest.controlPlaneMs)}`,
  );
  row(
    "DP event-loop block, one-route change",
    `p50 ${secondsAsMs(percentile(changeLags, 0.5))}, max ${secondsAsMs(Math.max(...changeLags))}`,
    "< 20 ms",
  );
  // The data plane's own timing of each delta's apply: the one turn it held its event loop,
  // apart from the time other processes on these two cores took the CPU away from it.
  row(
    "  DP apply of the delta (one turn, its own timing)",
    applyTimes.length === 0
      ? "not logged by this build"
      : `p50 ${percentile(applyTimes, 0.5).toFixed(1)} ms, max ${Math.max(...applyTimes).toFixed(1)} ms`,
  );
  row("  DP main thread in a change window (schedstat)", schedText(changeSched));
  row("  the change window with the longest block", longestWindowText(changeLags, changeSched));
  row(
    "DP event-loop block, idle window (no change, no scrape)",
    `p50 ${secondsAsMs(percentile(idleLags, 0.5))}, max ${secondsAsMs(Math.max(...idleLags))}`,
  );
  row("  DP main thread in an idle window (schedstat)", schedText(idleSched));
  row("  the idle window with the longest block", longestWindowText(idleLags, idleSched));
  // The witness stream took each change too.
  const wireBytes = (bytesAfter - bytesBefore) / (changes * (dataPlaneCount + 1));
  row("bytes on the wire per one-route change per DP", bytes(wireBytes), "independent of size");
}

/** One one-route change right after the fleet booted, to every real data plane. */
async function measureFirstChange(
  cp: ControlPlane,
  appliedVersions: AppliedVersions,
  row: Row,
): Promise<void> {
  // A priority no other change sets, so the write changes the route.
  const { revision, sentAt } = await changeOneRoute(cp, 800);
  const times = await appliedVersions.waitAll(revision, STEP_MS);
  const latencies = times.map((at) => at - sentAt);
  row(
    "first one-route change, while the fleet's first health reports are taken in",
    `p50 ${ms(percentile(latencies, 0.5))}, max ${ms(Math.max(...latencies))}`,
  );
}

/**
 * Waits until the control plane's view of node health holds every data plane's report, for
 * the first and the last upstream (each report lists every upstream; the control plane takes
 * a report in slice by slice, in its order), and says how long that took.
 */
async function waitForFleetHealth(cp: ControlPlane, count: number, row: Row): Promise<void> {
  const from = Date.now();
  for (const upstream of [upstreamName(0), upstreamName(size.upstreams - 1)]) {
    await waitFor(
      async () => {
        const health = await cp.admin.request<{ dataPlanes?: number }>(
          "GET",
          `/v1/upstreams/${upstream}/health`,
        );
        return health.status === 200 && health.body.dataPlanes === count;
      },
      {
        what: `${count} data planes' health of ${upstream} in the control plane's view`,
        timeoutMs: STEP_MS,
        intervalMs: 50,
      },
    );
  }
  row("fleet health taken in, after the first change", ms(Date.now() - from));
}

/** Resolves with the control plane's snapshot status once it published `version` or later. */
async function waitForPublished(cp: ControlPlane, version: number) {
  return waitFor(
    async () => {
      const snapshot = await cp.admin.snapshot();
      return snapshot.published && (snapshot.publishedVersion ?? snapshot.version) >= version
        ? snapshot
        : undefined;
    },
    { what: `the control plane to publish version ${version}`, timeoutMs: STEP_MS },
  );
}

/** Changes numbered from here on, so each sets a priority no change before it set. */
let nextByteChange = 900;

/**
 * Bytes that reach a data plane (a simulated one, which takes deltas) for each one-route
 * change at the config the control plane holds now, counted as they arrive: what a fleet's
 * bandwidth for config grows with. The streams start on the published version, so what they
 * receive is the changes alone.
 */
async function measureChangeBytes(cp: ControlPlane, config: string, row: Row): Promise<void> {
  const status = await cp.admin.snapshot();
  const start = status.publishedVersion ?? status.version;
  const prefix = `bytes-${nextByteChange}`;
  const streams = new SimulatedStreams(cp.grpcAddress, BYTE_STREAMS, start, prefix);
  try {
    await waitFor(
      async () =>
        (await cp.admin.dataplanes()).filter(
          (d) => d.nodeId.startsWith(`${prefix}-`) && d.state === "SYNCED",
        ).length === BYTE_STREAMS,
      { what: `${BYTE_STREAMS} streams to be SYNCED`, timeoutMs: STEP_MS, intervalMs: 20 },
    );
    let received = 0;
    const kinds = { full: 0, delta: 0 };
    const latest = new Map<number, number>();
    const stop = streams.onArrival((arrival) => {
      received += arrival.bytes;
      kinds[arrival.kind]++;
      latest.set(arrival.stream, arrival.version);
    });
    for (let k = 0; k < BYTE_CHANGES; k++) {
      const { revision } = await changeOneRoute(cp, nextByteChange++);
      await waitFor(
        () => [...latest.values()].filter((version) => version >= revision).length === BYTE_STREAMS,
        {
          what: `${BYTE_STREAMS} streams to receive version ${revision}`,
          timeoutMs: STEP_MS,
          intervalMs: 2,
        },
      );
    }
    stop();
    row(
      `bytes on the wire per one-route change per DP, ${config}`,
      `${bytes(received / (BYTE_CHANGES * BYTE_STREAMS))} (${kinds.delta} deltas, ${kinds.full} whole)`,
      "independent of size",
    );
  } finally {
    streams.close();
  }
}

/** One-route changes timed to the simulated data planes, all on this one control plane. */
async function measureStreams(
  cp: ControlPlane,
  appliedVersions: AppliedVersions,
  teardown: Teardown,
  row: Row,
): Promise<void> {
  const current = (await cp.admin.snapshot()).version;
  const streams = new SimulatedStreams(cp.grpcAddress, streamCount, current);
  teardown.add("simulated streams", () => streams.close());
  await waitFor(
    async () =>
      (await cp.admin.dataplanes()).filter(
        (d) => d.nodeId.startsWith("simulated-") && d.state === "SYNCED",
      ).length === streamCount,
    {
      what: `${streamCount} simulated streams to be SYNCED`,
      timeoutMs: STEP_MS,
      intervalMs: 100,
    },
  );
  const streamLatencies: number[] = [];
  const kinds = { full: 0, delta: 0 };
  for (let k = 1; k <= streamChanges; k++) {
    const arrivals = new Map<number, number>();
    let target = Number.POSITIVE_INFINITY;
    const stop = streams.onArrival((arrival) => {
      if (arrival.version >= target && !arrivals.has(arrival.stream)) {
        arrivals.set(arrival.stream, arrival.atMs);
        kinds[arrival.kind]++;
      }
    });
    const revision = await changeOneRoute(cp, changes + k);
    target = revision.revision;
    await waitFor(() => arrivals.size === streamCount, {
      what: `${streamCount} simulated streams to receive version ${target}`,
      timeoutMs: STEP_MS,
      intervalMs: 2,
    });
    stop();
    for (const at of arrivals.values()) streamLatencies.push(at - revision.sentAt);
    // The real data planes apply it too; let them finish before the next change.
    await appliedVersions.waitAll(revision.revision, STEP_MS);
  }
  row(
    `one-route change to ${streamCount} simulated streams (${streamChanges} changes)`,
    `p50 ${ms(percentile(streamLatencies, 0.5))}, p99 ${ms(percentile(streamLatencies, 0.99))} (${kinds.delta} deltas, ${kinds.full} whole)`,
    "p99 < 1 s",
  );
}

function firstLine(error: unknown): string {
  return error instanceof Error ? error.message.split("\n")[0]! : String(error);
}

/**
 * Rewrites route r-0 with a new priority, through POST /v1/apply of that one route (PUT reads
 * more of the store and is refused sooner as the config grows): one route's document changes,
 * nothing else. The clock starts before the request, so the latency includes the store write.
 */
async function changeOneRoute(
  cp: ControlPlane,
  k: number,
): Promise<{ revision: number; sentAt: number }> {
  const { name, request: _request, ...shape } = routeShape(0, size.upstreams);
  const sentAt = Date.now();
  const response = await cp.admin.apply([
    { kind: "route", name, spec: routeSpec(shape, k % 1000) },
  ]);
  const revision = (response.body as { revision?: number }).revision;
  if (typeof revision !== "number") throw new Error("POST /v1/apply answered no revision");
  return { revision, sentAt };
}

/**
 * `name` from every data plane's /metrics, asking for that family alone: a whole scrape at
 * 20,000 nodes is megabytes, and the block it caused would land in the window the next read
 * reports (reading the event-loop lag also starts a new window).
 */
async function scrapeAll(
  dataPlanes: DataPlane[],
  name: string,
  /** Called with each DP's index as its answer arrives. */
  answered?: (index: number) => void,
): Promise<number[]> {
  const values: number[] = [];
  // One at a time and with a long deadline: ten busy data planes on two cores answer slowly.
  for (const [i, dp] of dataPlanes.entries()) {
    const response = await fetch(`${dp.adminUrl}/metrics?name=${name}`, {
      signal: AbortSignal.timeout(STEP_MS),
    });
    answered?.(i);
    values.push(metricValue(await response.text(), name) ?? Number.NaN);
  }
  return values;
}

/**
 * "own run p50 2 ms, max 9 ms; runqueue wait p50 1 ms, max 40 ms": what the DPs' event loops
 * got of a CPU over their windows, and how long they were ready to run but waited for one.
 */
function schedText(windows: readonly (ThreadSched | undefined)[]): string {
  const known = windows.filter((w) => w !== undefined);
  if (known.length === 0) return "no schedstat on this kernel";
  const run = known.map((w) => w.runMs);
  const wait = known.map((w) => w.waitMs);
  return (
    `own run p50 ${ms(percentile(run, 0.5))}, max ${ms(Math.max(...run))}; ` +
    `runqueue wait p50 ${ms(percentile(wait, 0.5))}, max ${ms(Math.max(...wait))}`
  );
}

/** The window whose event-loop block was longest, split into own run and runqueue wait. */
function longestWindowText(lags: readonly number[], windows: readonly (ThreadSched | undefined)[]) {
  let at = 0;
  for (const [i, lag] of lags.entries()) if (lag > lags[at]!) at = i;
  const window = windows[at];
  const block = `block ${secondsAsMs(lags[at] ?? Number.NaN)}`;
  if (window === undefined) return block;
  return `${block}: own run ${ms(window.runMs)}, runqueue wait ${ms(window.waitMs)}, ${window.slices} slices`;
}

/**
 * The block a whole /metrics scrape (what Prometheus does) causes each data plane, as its own
 * figure: a new lag window, the scrape, a window for its block to be recorded, the lag read.
 */
async function measureScrapes(dataPlanes: DataPlane[], row: Row): Promise<void> {
  const lags: number[] = [];
  const idle: number[] = [];
  for (let k = 0; k < SCRAPES; k++) {
    for (const dp of dataPlanes) {
      await scrapeAll([dp], LAG);
      await new Promise((resolve) => setTimeout(resolve, 100));
      idle.push(...(await scrapeAll([dp], LAG)));
      await (
        await fetch(`${dp.adminUrl}/metrics`, { signal: AbortSignal.timeout(STEP_MS) })
      ).text();
      await new Promise((resolve) => setTimeout(resolve, 100));
      lags.push(...(await scrapeAll([dp], LAG)));
    }
  }
  row(
    "DP event-loop block, one whole /metrics scrape",
    `p50 ${secondsAsMs(percentile(lags, 0.5))}, max ${secondsAsMs(Math.max(...lags))}`,
  );
  row(
    "DP event-loop block, same window without a scrape",
    `p50 ${secondsAsMs(percentile(idle, 0.5))}, max ${secondsAsMs(Math.max(...idle))}`,
  );
}

async function cpMetric(cp: ControlPlane, name: string): Promise<number> {
  const response = await fetch(`${cp.adminUrl}/metrics`, {
    headers: { authorization: `Bearer ${cp.token}` },
    signal: AbortSignal.timeout(10_000),
  });
  const value = metricValue(await response.text(), name);
  if (value === undefined) throw new Error(`the control plane's /metrics has no ${name}`);
  return value;
}

function percentile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

/** "2.31 s (main 1.80 s, probe worker 0.12 s)": p50 of each over the processes. */
function cpuText(cpu: readonly ThreadCpu[]): string {
  const p50 = (pick: (c: ThreadCpu) => number) => percentile(cpu.map(pick), 0.5).toFixed(2);
  return `${p50((c) => c.total)} s (main ${p50((c) => c.main)} s, busiest other thread ${p50((c) => c.busiestOther)} s)`;
}

function ms(value: number): string {
  return `${value.toFixed(0)} ms`;
}

function secondsAsMs(values: number | readonly number[]): string {
  const value = typeof values === "number" ? values : Math.max(...values);
  return ms(value * 1000);
}

function bytes(value: number): string {
  if (value >= 1024 * 1024) return `${(value / 1024 / 1024).toFixed(1)} MiB`;
  // A delta of one route is a few hundred bytes: KiB to one decimal would hide its size.
  return value >= 1024 ? `${(value / 1024).toFixed(1)} KiB` : `${value.toFixed(0)} B`;
}

function setting(name: string, fallback: number): number {
  const text = process.env[`CLAWGATE_BENCH_${name}`];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`CLAWGATE_BENCH_${name} must be a whole number above 0, got ${text}`);
  }
  return value;
}

function log(message: string): void {
  process.stderr.write(`bench:scale: ${message}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `bench:scale failed: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exitCode = 1;
});
