import { cpus } from "node:os";
import { startControlPlane } from "../support/control-plane-process.js";
import { waitForConvergence } from "../support/convergence.js";
import { startDataPlane } from "../support/data-plane-process.js";
import { freePorts } from "../support/free-port.js";
import { send } from "../support/proxy-client.js";
import { Teardown } from "../support/teardown.js";
import { makeWorkDir, removeWorkDir } from "../support/work-dir.js";
import { fixedJsonBody, startNginx } from "./nginx-process.js";
import { cpuSeconds, processTree, residentMiB } from "./process-usage.js";
import { formatReport, type Measured } from "./report-table.js";
import { runWrk } from "./wrk-process.js";

/**
 * `npm run bench`: the same small response fetched directly from an nginx static upstream,
 * through nginx as a reverse proxy, and through Clawgate (control plane on the embedded store,
 * one data plane), with wrk, one after another in one run so the three share the machine's
 * state. It measures and reports; it asserts nothing.
 *
 * Environment: BENCH_DURATION (wrk -d, default 10s), BENCH_CONNECTIONS (default 32),
 * BENCH_WARMUP (wrk -d of an unreported run first, default 2s; 0 skips it),
 * BENCH_BODY_BYTES (response size, default 1024).
 */
const duration = seconds(process.env.BENCH_DURATION ?? "10s");
const warmup = seconds(process.env.BENCH_WARMUP ?? "2s");
const connections = Number(process.env.BENCH_CONNECTIONS ?? "32");
const bodyBytes = Number(process.env.BENCH_BODY_BYTES ?? "1024");

async function main(): Promise<void> {
  const teardown = new Teardown();
  const interrupted = () => {
    process.stderr.write("\ninterrupted: stopping everything\n");
    void teardown.run().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  try {
    const dir = await makeWorkDir("bench");
    teardown.add("bench dir", () => removeWorkDir(dir));
    const [upstreamPort, nginxPort] = await freePorts(2);

    log(`starting the upstream (nginx static) on 127.0.0.1:${upstreamPort}`);
    const body = fixedJsonBody(bodyBytes);
    const upstream = await startNginx({
      name: "upstream",
      dir,
      port: upstreamPort!,
      serverBody: `    location = /healthz { default_type application/json; return 200 '{"status":"ok"}'; }
    location / { default_type application/json; return 200 '${body}'; }`,
    });
    teardown.add("upstream nginx", () => upstream.stop());

    log(`starting nginx as a reverse proxy on 127.0.0.1:${nginxPort}`);
    const proxy = await startNginx({
      name: "nginx-proxy",
      dir,
      port: nginxPort!,
      httpExtra: `  upstream bench { server 127.0.0.1:${upstreamPort}; keepalive 64; }`,
      serverBody: `    location / {
      proxy_pass http://bench;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }`,
    });
    teardown.add("nginx proxy", () => proxy.stop());

    log("starting Clawgate: control plane (embedded store) and one data plane");
    const quiet = { CLAWGATE_LOG_LEVEL: "warn" };
    const cp = await startControlPlane(quiet);
    teardown.add("control plane", () => cp.stop());
    await cp.admin.apply([
      {
        kind: "upstream",
        name: "bench",
        spec: { nodes: [{ address: `127.0.0.1:${upstreamPort}` }] },
      },
      { kind: "route", name: "bench", spec: { match: { pathPrefix: "/" }, upstream: "bench" } },
    ]);
    const dp = await startDataPlane({
      ...quiet,
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_NODE_ID: "bench",
    });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp]);

    // The processes whose CPU and memory each run is charged to: the proxy under test, or
    // none for the direct run (the upstream serves every run alike).
    const targets = [
      { target: "direct", url: `http://127.0.0.1:${upstreamPort}/`, pid: undefined },
      { target: "nginx", url: `http://127.0.0.1:${nginxPort}/`, pid: proxy.pid },
      { target: "clawgate", url: `${dp.proxyUrl}/`, pid: dp.process.pid },
    ];
    // Same bytes from all three, or the comparison means nothing.
    for (const { target, url } of targets) {
      const response = await send(url);
      if (response.status !== 200 || response.text !== body) {
        throw new Error(`${target} at ${url} answered ${response.status} with a different body`);
      }
    }

    log(
      `wrk -t1 -c${connections} -d${duration}s --latency, warm-up ${warmup}s, ${cpus().length} cores, node ${process.version}`,
    );
    const rows: Measured[] = [];
    for (const { target, url, pid } of targets) {
      if (warmup > 0) await runWrk(url, { connections, duration: `${warmup}s` });
      log(`measuring ${target}`);
      const pids = pid === undefined ? [] : processTree(pid);
      const cpuBefore = cpuSeconds(pids);
      const result = await runWrk(url, { connections, duration: `${duration}s` });
      const cpuUsed = cpuSeconds(pids) - cpuBefore;
      rows.push({
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
    process.stdout.write(`\n${formatReport(rows)}\n\n`);
  } finally {
    await teardown.run();
  }
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
