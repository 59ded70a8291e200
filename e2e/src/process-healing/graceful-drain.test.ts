import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CONTROL_PLANE_BIN,
  type ControlPlane,
  DATA_PLANE_BIN,
  describeExit,
  httpStatus,
  ManagedProcess,
  splitHostPort,
  startControlPlane,
  startDataPlane,
  Teardown,
  tcpReachable,
  waitFor,
} from "../support/index.js";
import { startRequestWaves } from "./request-waves.js";
import { type SlowUpstream, startSlowUpstream } from "./slow-upstream.js";

const WAVE = 40;
const UPSTREAM_DELAY_MS = 200;

describe("graceful drain and listeners that cannot bind (etcd, control plane, data planes)", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let upstream: SlowUpstream;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    upstream = await startSlowUpstream(UPSTREAM_DELAY_MS);
    teardown.add("slow upstream", () => upstream.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("slow", { nodes: [{ address: upstream.address, weight: 1 }] });
    await cp.admin.putRoute("slow", { match: { pathPrefix: "/slow" }, upstream: "slow" });
  });

  afterAll(() => teardown.run());

  it("SIGTERM during a stream of 200 ms requests: every request in flight completes with 200", async () => {
    const dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    const waves = startRequestWaves(`${dp.proxyUrl}/slow/x`, WAVE);
    teardown.add("request waves", () => waves.stop());
    await waitFor(() => waves.completedWaves >= 3, { what: "three full waves" });

    // Wait until a whole wave is at the upstream: every connection is busy, none idle.
    const before = upstream.served;
    await waitFor(() => upstream.active === WAVE, { what: `${WAVE} requests at the upstream` });
    const inFlightWave = waves.currentWave;
    const signalledAt = performance.now();
    process.kill(dp.process.pid, "SIGTERM");

    // While it drains: not ready, and no new connections.
    const readyz = await waitFor(
      async () => {
        const status = await httpStatus(`${dp.adminUrl}/readyz`, 200);
        return status === 503 ? status : false;
      },
      { what: "/readyz to answer 503 while draining", timeoutMs: 5_000, intervalMs: 5 },
    );
    expect(readyz).toBe(503);
    const proxy = splitHostPort(dp.env.CLAWGATE_PROXY_LISTEN!);
    expect(await tcpReachable(proxy.host, proxy.port)).toBe(false);

    const exit = await dp.process.exited;
    // A figure for the log, not a bound: a busy machine stretches it.
    console.info(`drain after SIGTERM took ${Math.round(performance.now() - signalledAt)} ms`);
    await waves.stop();
    expect(describeExit(exit)).toBe("code 0");

    const wave = waves.requests.filter((entry) => entry.wave === inFlightWave);
    expect(wave).toHaveLength(WAVE);
    expect(wave.filter((entry) => entry.status !== 200)).toEqual([]);
    // They were answered by the upstream, not cut: the drain waited for them.
    expect(upstream.served - before).toBeGreaterThanOrEqual(WAVE);
    // Their responses told the clients not to reuse the connection.
    expect(wave.every((entry) => entry.connection === "close")).toBe(true);
    // The drain ended because the requests did, not because a deadline cut them.
    expect(dp.process.output.grep("graceful stop did not finish in time")).toEqual([]);
    // Requests of later waves found the listener closed: refused, which is fine.
    const later = waves.requests.filter((entry) => entry.wave > inFlightWave);
    expect(later.every((entry) => entry.status === undefined)).toBe(true);
    expect(dp.process.output.grep("drain timed out")).toEqual([]);
  });

  it("with a drain delay, SIGTERM turns /readyz 503 but new connections are served; a second SIGTERM drains", async () => {
    // Far longer than the test: only the second SIGTERM can end it.
    const dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_DRAIN_DELAY_MS: "120000",
    });
    teardown.add("delayed data plane", () => dp.stop());
    const proxy = splitHostPort(dp.env.CLAWGATE_PROXY_LISTEN!);
    process.kill(dp.process.pid, "SIGTERM");

    await waitFor(async () => (await httpStatus(`${dp.adminUrl}/readyz`, 200)) === 503, {
      what: "/readyz to answer 503 during the drain delay",
      timeoutMs: 5_000,
      intervalMs: 5,
    });
    // This fetch opens the first connection to the proxy: the listener still accepts.
    expect(await httpStatus(`${dp.proxyUrl}/slow/during-delay`, 5_000)).toBe(200);
    expect(await tcpReachable(proxy.host, proxy.port)).toBe(true);
    expect(dp.process.output.grep("not ready; serving on").length).toBeGreaterThan(0);

    process.kill(dp.process.pid, "SIGTERM");
    // The delay (120 s, past the test's timeout) was skipped, not waited out: the process says
    // so, and then exits on its own.
    const exit = await dp.process.exited;
    expect(describeExit(exit)).toBe("code 0");
    expect(dp.process.output.grep("second signal while stopping; draining now").length).toBe(1);
    expect(await tcpReachable(proxy.host, proxy.port)).toBe(false);
  });

  it("a second data plane on a taken proxy port exits non-zero, naming the address", async () => {
    const dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("first data plane", () => dp.stop());
    const taken = dp.env.CLAWGATE_PROXY_LISTEN!;
    const second = await ManagedProcess.spawn({
      name: "second data plane",
      command: process.execPath,
      args: [DATA_PLANE_BIN],
      env: {
        ...dp.env,
        CLAWGATE_NODE_ID: "second",
        CLAWGATE_DP_ADMIN_LISTEN: "127.0.0.1:0",
        CLAWGATE_CACHE_DIR: `${dp.env.CLAWGATE_CACHE_DIR}-second`,
      },
    });
    teardown.add("second data plane", () => second.kill());
    const exit = await second.exited;
    expect(exit.code).not.toBe(0);
    expect(exit.code).not.toBeNull();
    expect(second.output.grep(`cannot listen on ${taken}: EADDRINUSE`).length).toBeGreaterThan(0);
    // The first one is untouched.
    expect(await dp.readyStatus()).toBe(200);
  });

  it("a second control plane on a taken admin port exits non-zero, naming the address", async () => {
    const taken = cp.env.CLAWGATE_ADMIN_LISTEN!;
    const second = await ManagedProcess.spawn({
      name: "second control plane",
      command: process.execPath,
      args: [CONTROL_PLANE_BIN],
      env: { ...cp.env, CLAWGATE_GRPC_LISTEN: "127.0.0.1:0" },
    });
    teardown.add("second control plane", () => second.kill());
    const exit = await second.exited;
    expect(exit.code).not.toBe(0);
    expect(exit.code).not.toBeNull();
    expect(second.output.grep(`on ${taken}: EADDRINUSE`).length).toBeGreaterThan(0);
  });
});
