import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Pool } from "undici";
import { startControlPlane } from "../support/control-plane-process.js";
import { waitForConvergence } from "../support/convergence.js";
import { startDataPlane } from "../support/data-plane-process.js";
import { freePorts } from "../support/free-port.js";
import { Teardown } from "../support/teardown.js";
import { waitFor } from "../support/wait-for.js";
import { makeWorkDir, removeWorkDir } from "../support/work-dir.js";
import type { AllocFigures } from "./alloc-figures.js";
import { baselineAccessLog } from "./baseline-access-log.js";
import { fixedJsonBody, startNginx } from "./nginx-process.js";
import { startNodeProxy } from "./node-proxy-process.js";

/**
 * `npm run bench:alloc`: bytes the proxy's JS heap allocates per proxied request, for the
 * minimal undici dispatch proxy and for Clawgate (metrics, breaker, probes every second, 2 retry
 * attempts on the route; access log off, then on to a file), side by side. Allocation is the
 * figure that stays put on a busy machine where latency and throughput do not, and garbage is
 * what young-generation pauses are made of. Each proxy runs with alloc-probe.js preloaded; this
 * process sends BENCH_ALLOC_WARMUP GETs (100-byte response from an nginx upstream), opens the
 * probe's window, sends BENCH_ALLOC_REQUESTS more over BENCH_CONNECTIONS connections, closes
 * the window and prints the figures. It measures and reports; it asserts nothing but 200s.
 * BENCH_BASELINE_DP (another build's clawgate-data-plane.js) adds that build, its access log
 * off or, with BENCH_BASELINE_ACCESS_LOG=file, to a file.
 */
const requests = count("BENCH_ALLOC_REQUESTS", 20_000);
const warmupRequests = count("BENCH_ALLOC_WARMUP", 5_000);
const connections = count("BENCH_CONNECTIONS", 50);
const BODY_BYTES = 100;

interface Target {
  target: string;
  base: string;
  pid: number;
}

async function main(): Promise<void> {
  const teardown = new Teardown();
  process.once("SIGINT", () => void teardown.run().finally(() => process.exit(130)));
  try {
    const dir = await makeWorkDir("bench-alloc");
    teardown.add("bench dir", () => removeWorkDir(dir));
    const probe = fileURLToPath(new URL("./alloc-probe.js", import.meta.url));
    // Inherited by every process started below; only those that preload the probe read it.
    process.env.BENCH_ALLOC_PROBE_DIR = dir;
    const [upstreamPort, minimalPort] = await freePorts(2);
    const origin = `http://127.0.0.1:${upstreamPort}`;
    const upstream = await startNginx({
      name: "upstream",
      dir,
      port: upstreamPort!,
      serverBody: `    location = /healthz { default_type application/json; return 200 '{"status":"ok"}'; }
    location / { default_type application/json; return 200 '${fixedJsonBody(BODY_BYTES)}'; }`,
    });
    teardown.add("upstream nginx", () => upstream.stop());

    const minimal = await startNodeProxy("minimal-proxy", minimalPort!, origin, [
      `--import=${pathToFileURL(probe).href}`,
    ]);
    teardown.add("minimal proxy", () => minimal.stop());

    const quiet = { CLAWGATE_LOG_LEVEL: "warn" };
    const cp = await startControlPlane(quiet);
    teardown.add("control plane", () => cp.stop());
    await cp.admin.apply([
      {
        kind: "upstream",
        name: "bench",
        spec: {
          nodes: [{ address: `127.0.0.1:${upstreamPort}` }],
          healthCheck: { intervalMs: 1_000, path: "/healthz", expectStatus: "ok" },
          breaker: "default",
        },
      },
      { kind: "breaker", name: "default", spec: {} },
      {
        kind: "route",
        name: "bench",
        spec: { match: { pathPrefix: "/" }, upstream: "bench", retry: { attempts: 2 } },
      },
    ]);
    const dpEnv = {
      ...quiet,
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      NODE_OPTIONS: `--import=${pathToFileURL(probe).href}`,
    };
    const dp = await startDataPlane({
      ...dpEnv,
      CLAWGATE_NODE_ID: "alloc",
      CLAWGATE_ACCESS_LOG: "off",
    });
    teardown.add("data plane", () => dp.stop());
    const logged = await startDataPlane({
      ...dpEnv,
      CLAWGATE_NODE_ID: "alloc-log",
      CLAWGATE_ACCESS_LOG: join(dir, "access.log"),
    });
    teardown.add("data plane, access log on", () => logged.stop());
    // Another build measured in the same run, as `npm run bench` does (BENCH_BASELINE_DP).
    const baselineBin = process.env.BENCH_BASELINE_DP;
    const baselineLog = baselineAccessLog(dir);
    const baseline =
      baselineBin === undefined
        ? undefined
        : await startDataPlane(
            {
              ...dpEnv,
              CLAWGATE_NODE_ID: "alloc-baseline",
              CLAWGATE_ACCESS_LOG: baselineLog.setting,
            },
            { bin: baselineBin },
          );
    if (baseline !== undefined) teardown.add("baseline data plane", () => baseline.stop());
    await waitForConvergence(cp, baseline === undefined ? [dp, logged] : [dp, logged, baseline]);

    const targets: Target[] = [
      {
        target: "minimal undici proxy",
        base: `http://127.0.0.1:${minimalPort}`,
        pid: minimal.pid,
      },
      { target: "Clawgate, access log off", base: dp.proxyUrl, pid: dp.process.pid },
      { target: "Clawgate, access log to a file", base: logged.proxyUrl, pid: logged.process.pid },
    ];
    if (baseline !== undefined) {
      targets.push({
        target: `Clawgate baseline, ${baselineLog.label}`,
        base: baseline.proxyUrl,
        pid: baseline.process.pid,
      });
    }
    log(
      `${warmupRequests} warm-up then ${requests} measured GETs per target, ${connections} connections, node ${process.version}`,
    );
    const rows: [string, AllocFigures][] = [];
    for (const target of targets) {
      log(`measuring ${target.target}`);
      rows.push([target.target, await measure(target, dir)]);
    }
    process.stdout.write(`\n${formatTable(rows)}\n`);
  } finally {
    await teardown.run();
  }
}

async function measure({ target, base, pid }: Target, dir: string): Promise<AllocFigures> {
  const pool = new Pool(base, { connections });
  try {
    await drive(pool, warmupRequests);
    process.kill(pid, "SIGUSR2"); // opens the probe's window
    await drive(pool, requests);
    process.kill(pid, "SIGUSR2"); // closes it; the probe writes <pid>.json
    const file = join(dir, `${pid}.json`);
    const text = await waitFor(() => readFile(file, "utf8").catch(() => undefined), {
      what: `${target}'s allocation figures in ${file}`,
    });
    return JSON.parse(text) as AllocFigures;
  } finally {
    await pool.close();
  }
}

/** Sends `total` GETs to / over the pool's connections; any answer but 200 stops the bench. */
async function drive(pool: Pool, total: number): Promise<void> {
  let sent = 0;
  const lane = async () => {
    while (sent < total) {
      sent++;
      const { statusCode, body } = await pool.request({ method: "GET", path: "/" });
      await body.text();
      if (statusCode !== 200) throw new Error(`a proxied GET answered ${statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: connections }, lane));
}

function formatTable(rows: [string, AllocFigures][]): string {
  const floor = rows[0]![1].allocatedBytes;
  const lines = [
    "| target | allocated B/req | vs minimal | promoted to old space B/req | scavenges per 1,000 req | scavenge ms per 1,000 req | mean scavenge ms | longest scavenge ms | full GCs |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const [target, figures] of rows) {
    const meanScavenge =
      figures.scavenges === 0 ? "-" : ms(figures.scavengeMicros / figures.scavenges);
    lines.push(
      `| ${target} | ${perRequest(figures.allocatedBytes)} | ${(figures.allocatedBytes / floor).toFixed(2)}x | ${perRequest(figures.promotedBytes)} | ${((figures.scavenges * 1000) / requests).toFixed(1)} | ${ms((figures.scavengeMicros * 1000) / requests)} | ${meanScavenge} | ${ms(figures.longestScavengeMicros)} | ${figures.fullGcs} |`,
    );
  }
  return lines.join("\n");
}

/** Microseconds as milliseconds. */
function ms(micros: number): string {
  return (micros / 1000).toFixed(2);
}

function perRequest(bytes: number): string {
  return Math.round(bytes / requests).toLocaleString("en-US");
}

function count(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a whole number of at least 1, got ${text}`);
  }
  return value;
}

function log(message: string): void {
  process.stderr.write(`bench:alloc: ${message}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `bench:alloc failed: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exitCode = 1;
});
