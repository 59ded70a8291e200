import { readFile } from "node:fs/promises";
import { cpus } from "node:os";
import { makeTestPki } from "@clawgate/runtime/testing";
import { startControlPlane } from "../support/control-plane-process.js";
import { waitForConvergence } from "../support/convergence.js";
import { startDataPlane } from "../support/data-plane-process.js";
import { freePorts } from "../support/free-port.js";
import { httpsGet } from "../support/https-get.js";
import { send } from "../support/proxy-client.js";
import { Teardown } from "../support/teardown.js";
import { makeWorkDir, removeWorkDir } from "../support/work-dir.js";
import { baselineAccessLog } from "./baseline-access-log.js";
import { corePinning, pinTree } from "./core-pinning.js";
import { runH2load } from "./h2load-process.js";
import { fixedJsonBody, startNginx } from "./nginx-process.js";
import { startNodeProxy } from "./node-proxy-process.js";
import { benchWorkers, perWorkerLine } from "./per-worker.js";
import { cpuSeconds, processTree, residentMiB } from "./process-usage.js";
import { formatReport, type Measured } from "./report-table.js";
import { inTurn } from "./round-order.js";
import type { WrkResult } from "./wrk-output.js";
import { runWrk } from "./wrk-process.js";
import { SSE_EVENTS, sseBody, writePostScript } from "./wrk-scripts.js";

/**
 * `npm run bench`: the same responses fetched directly from an nginx static upstream, through
 * nginx as a reverse proxy, through a minimal node:http + undici dispatch proxy (the floor of
 * what Node can do), through @fastify/http-proxy, and through Clawgate (control plane on the
 * embedded store, one data plane with metrics, breakers, probes and 2 retry attempts on the
 * route; its access log on, to a file, and a twin with it off), with wrk, one after another in one run so they share the machine's state. Two
 * tables: a small GET, then a 64 KiB POST and an SSE response of 100 events. It measures and
 * reports; it asserts nothing.
 *
 * Environment: BENCH_DURATION (wrk -d per target and round, default 5s), BENCH_ROUNDS
 * (default 3; the median round is reported), BENCH_CONNECTIONS (default 50),
 * BENCH_WARMUP (wrk -d of an unreported run before each, default 1s; 0 skips it),
 * BENCH_BODY_BYTES (small response size, default 100), BENCH_NODE_FLAGS (extra node flags for
 * the Node proxies, e.g. --cpu-prof), BENCH_BASELINE_DP (another build's
 * data-plane/dist/bin/clawgate-data-plane.js, measured side by side as "clawgate-baseline"),
 * BENCH_BASELINE_ACCESS_LOG (the baseline's access log: off, the default, or file),
 * BENCH_DP_NODE_FLAGS (extra node flags for the data planes, e.g. --cpu-prof with an absolute
 * --cpu-prof-dir),
 * BENCH_WORKERS (the data plane's `workers`, default 1, or auto; each table then says its
 * requests/s per worker; wrk stays one thread, so raise BENCH_CONNECTIONS with it),
 * BENCH_H2_CLIENTS and BENCH_H2_STREAMS (the HTTP/2 table: h2load connections, default 5, and
 * streams in flight on each, default 10), BENCH_PIN (auto, the default, on or off: the load on
 * one CPU and the proxy under measurement on another, as issue 10's table was measured; see
 * core-pinning.ts).
 *
 * A third table is HTTP/2 from clients (h2load, from Debian's nghttp2-client): the small GET
 * over TLS to an nginx static server (direct), to nginx's http2 listener proxying to the same
 * upstream as above, and to Clawgate's TLS listener, both of them speaking HTTP/1.1 upstream.
 */
const duration = seconds(process.env.BENCH_DURATION ?? "5s");
const warmup = seconds(process.env.BENCH_WARMUP ?? "1s");
const rounds = Number(process.env.BENCH_ROUNDS ?? "3");
if (!Number.isInteger(rounds) || rounds < 1) {
  throw new Error(
    `BENCH_ROUNDS must be a whole number of at least 1, got ${process.env.BENCH_ROUNDS}`,
  );
}
const connections = Number(process.env.BENCH_CONNECTIONS ?? "50");
const bodyBytes = Number(process.env.BENCH_BODY_BYTES ?? "100");
const workers = benchWorkers(process.env.BENCH_WORKERS);
const h2Clients = Number(process.env.BENCH_H2_CLIENTS ?? "5");
const h2Streams = Number(process.env.BENCH_H2_STREAMS ?? "10");
// Extra node flags for the data planes (`--cpu-prof --cpu-prof-dir=/abs/dir`: a data plane runs
// in a temporary directory removed when it stops, so a relative directory is lost with it).
const dpNodeArgs = process.env.BENCH_DP_NODE_FLAGS?.split(" ").filter(Boolean) ?? [];
const pinning = corePinning(process.env.BENCH_PIN, workers.count);

interface Target {
  target: string;
  /** Scheme, host and port, no trailing slash. */
  base: string;
  /** The process charged with the run's CPU and memory; none for the direct run. */
  pid: number | undefined;
}

async function main(): Promise<void> {
  const teardown = new Teardown();
  const interrupted = () => {
    process.stderr.write("\ninterrupted: stopping everything\n");
    void teardown.run().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  try {
    // Before anything starts: whatever this process spawns (wrk, h2load, the upstream, the
    // control plane) inherits the load side's CPU; each proxy is moved to its own once started.
    pinTree(process.pid, pinning.load);
    log(`cores: ${pinning.describe}`);
    const dir = await makeWorkDir("bench");
    teardown.add("bench dir", () => removeWorkDir(dir));
    const [
      upstreamPort,
      nginxPort,
      minimalPort,
      fastifyPort,
      h2DirectPort,
      h2NginxPort,
      h2DpPort,
      h2LogOffPort,
    ] = await freePorts(8);
    const pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    const tls = { certFile: pki.serverCert, keyFile: pki.serverKey, caFile: pki.caCert };
    const origin = `http://127.0.0.1:${upstreamPort}`;

    log(`starting the upstream (nginx static) on 127.0.0.1:${upstreamPort}`);
    const body = fixedJsonBody(bodyBytes);
    const upstream = await startNginx({
      name: "upstream",
      dir,
      port: upstreamPort!,
      serverBody: `    client_max_body_size 1m;
    location = /healthz { default_type application/json; return 200 '{"status":"ok"}'; }
    location = /events { default_type text/event-stream; return 200 '${sseBody(SSE_EVENTS)}'; }
    location / { default_type application/json; return 200 '${body}'; }`,
    });
    teardown.add("upstream nginx", () => upstream.stop());

    log(`starting nginx as a reverse proxy on 127.0.0.1:${nginxPort}`);
    const nginx = await startNginx({
      name: "nginx-proxy",
      dir,
      port: nginxPort!,
      httpExtra: `  upstream bench { server 127.0.0.1:${upstreamPort}; keepalive 64; }`,
      // The 64 KiB POST body held in memory, as the Node proxies hold it: with nginx's default
      // 16 KiB buffer each body went to a temporary file, with a warning per request in the
      // error log, and that disk work (timeouts under load) was what the row measured.
      serverBody: `    client_max_body_size 1m;
    client_body_buffer_size 128k;
    location / {
      proxy_pass http://bench;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }`,
    });
    teardown.add("nginx proxy", () => nginx.stop());
    pinTree(nginx.pid, pinning.proxy);

    log(`starting nginx over TLS with HTTP/2: static on ${h2DirectPort}, proxy on ${h2NginxPort}`);
    const h2Direct = await startNginx({
      name: "upstream-h2",
      dir,
      port: h2DirectPort!,
      tls,
      serverBody: `    location / { default_type application/json; return 200 '${body}'; }`,
    });
    teardown.add("upstream nginx h2", () => h2Direct.stop());
    const h2Nginx = await startNginx({
      name: "nginx-proxy-h2",
      dir,
      port: h2NginxPort!,
      tls,
      httpExtra: `  upstream bench { server 127.0.0.1:${upstreamPort}; keepalive 64; }`,
      serverBody: `    location / {
      proxy_pass http://bench;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }`,
    });
    teardown.add("nginx proxy h2", () => h2Nginx.stop());
    pinTree(h2Nginx.pid, pinning.proxy);

    log("starting the minimal undici dispatch proxy and @fastify/http-proxy");
    const minimal = await startNodeProxy("minimal-proxy", minimalPort!, origin);
    teardown.add("minimal proxy", () => minimal.stop());
    const fastify = await startNodeProxy("fastify-proxy", fastifyPort!, origin);
    teardown.add("fastify proxy", () => fastify.stop());
    pinTree(minimal.pid, pinning.proxy);
    pinTree(fastify.pid, pinning.proxy);

    log("starting Clawgate: control plane (embedded store) and one data plane");
    const quiet = { CLAWGATE_LOG_LEVEL: "warn" };
    const cp = await startControlPlane(quiet);
    teardown.add("control plane", () => cp.stop());
    // Every healing feature on: probes every second, the default breaker, 2 retries.
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
    // The access log on, to a file: what it costs the proxy, not what reading a pipe costs
    // this process. Its twin below runs with the log off, so the two show its price.
    const dp = await startDataPlane(
      {
        ...quiet,
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_NODE_ID: "bench",
        CLAWGATE_ACCESS_LOG: `${dir}/access.log`,
        CLAWGATE_WORKERS: workers.setting,
        // The HTTP/2 table's target: the same data plane, on its TLS listener.
        CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${h2DpPort}`,
        CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
        CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
      },
      { nodeArgs: dpNodeArgs },
    );
    teardown.add("data plane", () => dp.stop());
    // The same settings but the log (workers, an idle TLS listener), so the two rows differ by
    // the log alone.
    const logOff = await startDataPlane(
      {
        ...quiet,
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_NODE_ID: "bench-log-off",
        CLAWGATE_ACCESS_LOG: "off",
        CLAWGATE_WORKERS: workers.setting,
        CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${h2LogOffPort}`,
        CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
        CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
      },
      { nodeArgs: dpNodeArgs },
    );
    teardown.add("data plane, access log off", () => logOff.stop());
    const baselineBin = process.env.BENCH_BASELINE_DP;
    const baseline =
      baselineBin === undefined
        ? undefined
        : await startDataPlane(
            {
              ...quiet,
              CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
              CLAWGATE_NODE_ID: "baseline",
              CLAWGATE_ACCESS_LOG: baselineAccessLog(dir).setting,
            },
            { bin: baselineBin, nodeArgs: dpNodeArgs },
          );
    if (baseline !== undefined) teardown.add("baseline data plane", () => baseline.stop());
    await waitForConvergence(cp, baseline === undefined ? [dp, logOff] : [dp, logOff, baseline]);
    for (const plane of [dp, logOff, baseline]) {
      if (plane !== undefined) pinTree(plane.process.pid, pinning.proxy);
    }

    const targets: Target[] = [
      { target: "direct", base: origin, pid: undefined },
      { target: "nginx", base: `http://127.0.0.1:${nginxPort}`, pid: nginx.pid },
      { target: "minimal", base: `http://127.0.0.1:${minimalPort}`, pid: minimal.pid },
      { target: "fastify-proxy", base: `http://127.0.0.1:${fastifyPort}`, pid: fastify.pid },
      { target: "clawgate", base: dp.proxyUrl, pid: dp.process.pid },
      { target: "clawgate-log-off", base: logOff.proxyUrl, pid: logOff.process.pid },
    ];
    if (baseline !== undefined) {
      targets.push({
        target: "clawgate-baseline",
        base: baseline.proxyUrl,
        pid: baseline.process.pid,
      });
    }
    // Same bytes from all of them, or the comparison means nothing.
    for (const { target, base } of targets) {
      for (const [path, expected] of [
        ["/", body],
        ["/events", sseBody(SSE_EVENTS).replaceAll("\\n", "\n")],
      ] as const) {
        const response = await send(`${base}${path}`);
        if (response.status !== 200 || response.text !== expected) {
          throw new Error(`${target} at ${base}${path} answered ${response.status}, another body`);
        }
      }
    }

    log(
      `wrk -t1 -c${connections} -d${duration}s --latency, warm-up ${warmup}s, median of ${rounds} rounds, ${cpus().length} cores (${pinning.describe}), node ${process.version}`,
    );
    const postScript = await writePostScript(dir);
    const wrk =
      (script: string | undefined) =>
      (url: string, seconds: number): Promise<WrkResult> =>
        runWrk(url, { connections, duration: `${seconds}s`, script });
    // CPU and RSS of "clawgate" are its whole process tree: the primary and every worker.
    const perWorker = (rows: Measured[]) => perWorkerLine(rows, "clawgate", workers.count);
    // Each table is printed once measured: a later table that fails (h2load with no request
    // done on a starved machine) no longer throws the earlier ones away.
    const small = await measureAll(targets, "/", `GET ${bodyBytes} B`, wrk(undefined));
    process.stdout.write(
      `\ncores: ${pinning.describe}\n\nGET, ${bodyBytes}-byte response\n${formatReport(small)}\n${perWorker(small)}\n`,
    );
    const post = await measureAll(targets, "/upload", "POST 64 KiB", wrk(postScript));
    process.stdout.write(
      `\nPOST, 64 KiB request body (retrying route)\n${formatReport(post)}\n${perWorker(post)}\n`,
    );
    const sse = await measureAll(targets, "/events", `SSE ${SSE_EVENTS} events`, wrk(undefined));
    process.stdout.write(
      `\nSSE, ${SSE_EVENTS} events per response\n${formatReport(sse)}\n${perWorker(sse)}\n`,
    );
    const h2Targets: Target[] = [
      { target: "direct-h2", base: `https://127.0.0.1:${h2DirectPort}`, pid: undefined },
      { target: "nginx-h2", base: `https://127.0.0.1:${h2NginxPort}`, pid: h2Nginx.pid },
      { target: "clawgate-h2", base: `https://127.0.0.1:${h2DpPort}`, pid: dp.process.pid },
    ];
    // The same check over TLS (HTTP/1.1 here; h2load counts any non-2xx as an error).
    const ca = await readFile(pki.caCert, "utf8");
    for (const { target, base } of h2Targets) {
      const reply = await httpsGet(Number(new URL(base).port), "/", ca, "localhost");
      if (reply.status !== 200 || reply.body !== body) {
        throw new Error(`${target} at ${base}/ answered ${reply.status}, another body`);
      }
    }
    log(`h2load -t1 -c${h2Clients} -m${h2Streams}, the same warm-up, duration and rounds`);
    const h2 = await measureAll(h2Targets, "/", `HTTP/2 GET ${bodyBytes} B`, (url, seconds) =>
      runH2load(url, {
        clients: h2Clients,
        streams: h2Streams,
        durationSeconds: seconds,
        logFile: `${dir}/h2load.log`,
      }),
    );
    process.stdout.write(
      `\nHTTP/2 over TLS, GET ${bodyBytes}-byte response (h2load -c${h2Clients} -m${h2Streams}; HTTP/1.1 upstream)\n${formatReport(h2)}\n\n`,
    );
  } finally {
    await teardown.run();
  }
}

/**
 * BENCH_ROUNDS rounds of one wrk run per target on `path`, the targets in turn within each
 * round (each round starting one target later), so a burst of load from elsewhere on the
 * machine hits every target alike; each target is reported by its median round (by
 * requests/s), charged to its proxy's process tree, with how many of its rounds had errors,
 * and keeps every round's figures for the table's same-round ratios.
 */
async function measureAll(
  targets: readonly Target[],
  path: string,
  what: string,
  load: (url: string, seconds: number) => Promise<WrkResult>,
): Promise<Measured[]> {
  const runs = new Map<string, Measured[]>(targets.map(({ target }) => [target, []]));
  for (let round = 1; round <= rounds; round++) {
    for (const { target, base, pid } of inTurn(targets, round)) {
      const url = `${base}${path}`;
      if (warmup > 0) await load(url, warmup);
      log(`measuring ${target}: ${what}, round ${round} of ${rounds}`);
      const pids = pid === undefined ? [] : processTree(pid);
      const cpuBefore = cpuSeconds(pids);
      const result = await load(url, duration);
      const cpuUsed = cpuSeconds(pids) - cpuBefore;
      runs.get(target)!.push({
        target,
        result,
        usage:
          pid === undefined
            ? undefined
            : {
                cpuMicrosPerRequest: (cpuUsed * 1e6) / Math.max(1, result.requests),
                residentMiB: residentMiB(pids),
              },
      });
    }
  }
  return targets.map(({ target }) => {
    const measured = runs.get(target)!;
    const count = measured.filter(({ result }) => result.errors > 0).length;
    // The ratio columns are read round by round: a round's targets ran back to back.
    const perRound = measured.map(({ result, usage }) => ({ result, usage }));
    return {
      ...median(measured),
      erroredRounds: { count, of: measured.length },
      rounds: perRound,
    };
  });
}

function median(measured: Measured[]): Measured {
  const sorted = [...measured].sort(
    (a, b) => a.result.requestsPerSecond - b.result.requestsPerSecond,
  );
  return sorted[Math.floor(sorted.length / 2)]!;
}

function seconds(text: string): number {
  const match = /^(\d+)(s?)$/.exec(text.trim());
  if (match === null) throw new Error(`duration must be whole seconds like 10 or 10s, got ${text}`);
  return Number(match[1]);
}

function log(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
