import { readdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startControlPlane } from "../support/control-plane-process.js";
import { waitForConvergence } from "../support/convergence.js";
import { startDataPlane } from "../support/data-plane-process.js";
import { freePorts } from "../support/free-port.js";
import { Teardown } from "../support/teardown.js";
import { waitFor } from "../support/wait-for.js";
import { makeWorkDir, removeWorkDir } from "../support/work-dir.js";
import { corePinning, pinTree } from "./core-pinning.js";
import { fixedJsonBody, startNginx } from "./nginx-process.js";
import { startNodeProxy } from "./node-proxy-process.js";
import { cpuSeconds, processTree } from "./process-usage.js";
import { inTurn } from "./round-order.js";
import { sameRoundRatio } from "./same-round-ratio.js";
import type { WrkResult } from "./wrk-output.js";
import { runWrk } from "./wrk-process.js";
import { POST_BODY_BYTES, SSE_EVENTS, sseBody, writePostScript } from "./wrk-scripts.js";

/**
 * `npm run bench:ab`: the quick side-by-side for work on the data plane's request path. The
 * minimal undici proxy, this build's data plane and, with BENCH_BASELINE_DP, another build's,
 * take turns under wrk (BENCH_REQUEST, BENCH_CONNECTIONS connections) for BENCH_ROUNDS rounds
 * of BENCH_DURATION, in an order that turns and reverses from round to round. Printed: each
 * target's median CPU us/request, req/s and p99, and the median over rounds of its CPU against
 * the minimal proxy's (and the baseline's, or the log-off twin's) and of its p99 against the
 * minimal proxy's, in the same round (sameRoundRatio). On a shared machine only these
 * same-round ratios mean anything.
 * BENCH_ACCESS_LOG: the data planes' access log, `file` (default, as shipped), `off`, or `both`
 * (this build twice, `clawgate` logging to a file and `clawgate-log-off`: the log's price).
 * BENCH_REQUEST: `get` (default), `post` (a 64 KiB body) or `sse` (a response of 100 server-sent
 * events), as `npm run bench`'s second and third tables.
 * BENCH_DP_NODE_FLAGS: extra node flags for the data planes (e.g. --cpu-prof with an absolute
 * --cpu-prof-dir); BENCH_NODE_FLAGS the minimal proxy's. BENCH_PROFILE_DIR (absolute): after
 * the rounds, one more wrk run per target under a CPU profile of just that run
 * (cpu-profile-probe.ts), written there as `<target>.cpuprofile` with `<target>.json` holding
 * its request count, for profile-summary.js. BENCH_PIN: as `npm run bench`'s (the load on one CPU,
 * the proxy under measurement on another; default auto). It measures; it asserts nothing.
 */
const rounds = Number(process.env.BENCH_ROUNDS ?? "7");
const duration = process.env.BENCH_DURATION ?? "3s";
const connections = Number(process.env.BENCH_CONNECTIONS ?? "50");
const accessLog = process.env.BENCH_ACCESS_LOG ?? "file";
if (accessLog !== "file" && accessLog !== "off" && accessLog !== "both") {
  throw new Error(`BENCH_ACCESS_LOG must be file, off or both, got ${accessLog}`);
}
const request = (process.env.BENCH_REQUEST ?? "get") as "get" | "post" | "sse";
if (request !== "get" && request !== "post" && request !== "sse") {
  throw new Error(`BENCH_REQUEST must be get, post or sse, got ${request}`);
}
if (!Number.isInteger(rounds) || rounds < 1) {
  throw new Error(`BENCH_ROUNDS must be a whole number of at least 1, got ${rounds}`);
}
const requestName = {
  get: "GET",
  post: `POST ${POST_BODY_BYTES} B`,
  sse: `SSE ${SSE_EVENTS} events`,
};
const dpNodeArgs = process.env.BENCH_DP_NODE_FLAGS?.split(" ").filter(Boolean) ?? [];
// This build once more as the baseline, with other node flags: what a flag costs or saves.
const baselineNodeArgs = process.env.BENCH_BASELINE_DP_NODE_FLAGS?.split(" ").filter(Boolean);
if (baselineNodeArgs !== undefined && process.env.BENCH_BASELINE_DP !== undefined) {
  throw new Error("set BENCH_BASELINE_DP or BENCH_BASELINE_DP_NODE_FLAGS, not both");
}
const profileDir = process.env.BENCH_PROFILE_DIR;
const pinning = corePinning(process.env.BENCH_PIN, 1);
const profileProbe = pathToFileURL(
  fileURLToPath(new URL("./cpu-profile-probe.js", import.meta.url)),
).href;

interface Round {
  cpuMicros: number;
  requestsPerSecond: number;
  p99Ms: number;
  errors: number;
  errorKinds: string;
}

async function main(): Promise<void> {
  const teardown = new Teardown();
  process.once("SIGINT", () => void teardown.run().finally(() => process.exit(130)));
  try {
    pinTree(process.pid, pinning.load);
    const dir = await makeWorkDir("bench-ab");
    teardown.add("bench dir", () => removeWorkDir(dir));
    const [upstreamPort, minimalPort] = await freePorts(2);
    const origin = `http://127.0.0.1:${upstreamPort}`;
    const upstream = await startNginx({
      name: "upstream",
      dir,
      port: upstreamPort!,
      serverBody: `    client_max_body_size 1m;
    location = /healthz { default_type application/json; return 200 '{"status":"ok"}'; }
    location = /events { default_type text/event-stream; return 200 '${sseBody(SSE_EVENTS)}'; }
    location / { default_type application/json; return 200 '${fixedJsonBody(100)}'; }`,
    });
    teardown.add("upstream nginx", () => upstream.stop());
    const minimal = await startNodeProxy(
      "minimal-proxy",
      minimalPort!,
      origin,
      profileDir === undefined ? [] : [`--import=${profileProbe}`],
    );
    teardown.add("minimal proxy", () => minimal.stop());
    pinTree(minimal.pid, pinning.proxy);

    const quiet = { CLAWGATE_LOG_LEVEL: "warn" };
    const cp = await startControlPlane(quiet);
    teardown.add("control plane", () => cp.stop());
    // The bench's route: metrics, the default breaker, probes every second, 2 retry attempts.
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
    const logs = accessLog !== "off";
    const builds: { target: string; bin?: string; logs: boolean; nodeArgs: string[] }[] = [
      { target: "clawgate", logs, nodeArgs: dpNodeArgs },
    ];
    if (accessLog === "both") {
      builds.push({ target: "clawgate-log-off", logs: false, nodeArgs: dpNodeArgs });
    }
    if (baselineNodeArgs !== undefined) {
      builds.push({ target: "clawgate-baseline", logs, nodeArgs: baselineNodeArgs });
    }
    const baselineBin = process.env.BENCH_BASELINE_DP;
    if (baselineBin !== undefined) {
      builds.push({ target: "clawgate-baseline", bin: baselineBin, logs, nodeArgs: dpNodeArgs });
    }
    const targets = [
      { target: "minimal", base: `http://127.0.0.1:${minimalPort}`, pid: minimal.pid },
    ];
    const dataPlanes = [];
    for (const { target, bin, logs, nodeArgs } of builds) {
      const dp = await startDataPlane(
        {
          ...quiet,
          CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
          CLAWGATE_NODE_ID: target,
          CLAWGATE_ACCESS_LOG: logs ? `${dir}/${target}-access.log` : "off",
          ...(profileDir === undefined
            ? {}
            : { NODE_OPTIONS: `--import=${profileProbe}`, BENCH_PROFILE_DIR: profileDir }),
        },
        { nodeArgs, ...(bin === undefined ? {} : { bin }) },
      );
      teardown.add(target, () => dp.stop());
      dataPlanes.push(dp);
      targets.push({ target, base: dp.proxyUrl, pid: dp.process.pid });
    }
    await waitForConvergence(cp, dataPlanes);
    for (const dp of dataPlanes) pinTree(dp.process.pid, pinning.proxy);

    log(
      `wrk -t1 -c${connections} -d${duration}, ${requestName[request]}, ${rounds} rounds, access log ${accessLog}, ${pinning.describe}`,
    );
    const script = request === "post" ? await writePostScript(dir) : undefined;
    const load = (base: string, seconds: string) =>
      runWrk(`${base}${request === "sse" ? "/events" : "/"}`, {
        connections,
        duration: seconds,
        script,
      });
    const runs = new Map<string, Round[]>(targets.map(({ target }) => [target, []]));
    for (const { base } of targets) await load(base, "2s");
    for (let round = 1; round <= rounds; round++) {
      for (const { target, base, pid } of inTurnBothWays(targets, round)) {
        const pids = processTree(pid);
        const before = cpuSeconds(pids);
        const result = await load(base, duration);
        const used = cpuSeconds(pids) - before;
        runs.get(target)!.push({
          cpuMicros: (used * 1e6) / Math.max(1, result.requests),
          requestsPerSecond: result.requestsPerSecond,
          p99Ms: result.p99Ms,
          errors: result.errors,
          errorKinds: result.errorKinds,
        });
      }
      log(
        `round ${round}: ${targets.map(({ target }) => `${target} ${runs.get(target)!.at(-1)!.cpuMicros.toFixed(1)}`).join(", ")} CPU us/req`,
      );
    }
    const floor = runs.get("minimal")!;
    // The other build when there is one, else this build with its log off: what the column
    // prices is the difference between the two.
    const reference = ["clawgate-baseline", "clawgate-log-off"].find((name) => runs.has(name));
    const baselineRuns = reference === undefined ? undefined : runs.get(reference);
    const lines = [
      `| target | CPU us/req | vs minimal | vs ${reference ?? "baseline"} | req/s | p99 ms | p99 vs minimal | errors |`,
      "|---|---:|---:|---:|---:|---:|---:|---|",
    ];
    for (const { target } of targets) {
      const own = runs.get(target)!;
      const cpu = (rounds: readonly Round[]) => rounds.map((r) => r.cpuMicros);
      const p99 = (rounds: readonly Round[]) => rounds.map((r) => r.p99Ms);
      const ratio = (value: number | undefined) =>
        value === undefined ? "-" : `${value.toFixed(3)}x`;
      const vsBaseline =
        baselineRuns === undefined ? "-" : ratio(sameRoundRatio(cpu(own), cpu(baselineRuns)));
      lines.push(
        `| ${target} | ${median(cpu(own)).toFixed(1)} | ${ratio(sameRoundRatio(cpu(own), cpu(floor)))} | ${vsBaseline} | ${median(own.map((r) => r.requestsPerSecond)).toFixed(0)} | ${median(p99(own)).toFixed(2)} | ${ratio(sameRoundRatio(p99(own), p99(floor)))} | ${errorsOf(own)} |`,
      );
    }
    process.stdout.write(`\n${lines.join("\n")}\n`);
    if (profileDir !== undefined) {
      for (const { target, base, pid } of targets) {
        await profileOne(target, pid, profileDir, () => load(base, duration));
      }
    }
  } finally {
    await teardown.run();
  }
}

/** One wrk run of `target` under the preloaded probe's CPU profile, saved by target name. */
async function profileOne(
  target: string,
  pid: number,
  dir: string,
  load: () => Promise<WrkResult>,
): Promise<void> {
  process.kill(pid, "SIGUSR2");
  const result = await load();
  process.kill(pid, "SIGUSR2");
  const kind = process.env.BENCH_PROFILE_KIND === "heap" ? "heapprofile" : "cpuprofile";
  const file = `${pid}.${kind}`;
  await waitFor(async () => (await readdir(dir)).includes(file), {
    what: `${target}'s CPU profile`,
    timeoutMs: 30_000,
  });
  await rename(join(dir, file), join(dir, `${target}.${kind}`));
  await writeFile(join(dir, `${target}.json`), JSON.stringify({ requests: result.requests }));
  log(`profiled ${target}: ${result.requests} requests`);
}

/**
 * inTurn's order, reversed every other round: turning alone keeps each target right after the
 * same neighbour, and in an A/A run (one build twice) the one after the minimal proxy came out
 * about 5 % dearer than its twin.
 */
function inTurnBothWays<T>(targets: readonly T[], round: number): T[] {
  const order = inTurn(targets, Math.ceil(round / 2));
  return round % 2 === 0 ? order.reverse() : order;
}

/** Errors over all rounds, with the kinds of each round that had some. */
function errorsOf(rounds: readonly Round[]): string {
  const total = rounds.reduce((sum, r) => sum + r.errors, 0);
  if (total === 0) return "0";
  const kinds = rounds
    .map((r, i) => (r.errors > 0 ? `round ${i + 1}: ${r.errorKinds}` : ""))
    .filter(Boolean);
  return `${total} (${kinds.join("; ")})`;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function log(message: string): void {
  process.stderr.write(`bench:ab: ${message}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `bench:ab failed: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exitCode = 1;
});
