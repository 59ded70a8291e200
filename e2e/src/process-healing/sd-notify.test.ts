import { afterAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  freePorts,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  whoAnswered,
} from "../support/index.js";
import { type NotifyListener, startNotifyListener } from "./notify-listener.js";

// The real binaries talk to a unix datagram socket the test owns, as they would to systemd.
describe("sd_notify: READY, STATUS, WATCHDOG and STOPPING from the real binaries", () => {
  const teardown = new Teardown();
  afterAll(() => teardown.run());

  let dpNotify: NotifyListener;
  let cpNotify: NotifyListener;
  let dp: DataPlane;
  let cp: ControlPlane;
  let cpGrpc: string;

  it("data plane: says it waits for the control plane, and is not READY without a snapshot", async () => {
    dpNotify = await startNotifyListener();
    teardown.add("dp notify socket", () => dpNotify.close());
    const [grpcPort] = await freePorts(1);
    // Nothing listens here yet: the control plane comes later, on this address.
    cpGrpc = `127.0.0.1:${grpcPort}`;
    dp = await startDataPlane(
      {
        CLAWGATE_CP_ADDRESSES: cpGrpc,
        NOTIFY_SOCKET: dpNotify.path,
        WATCHDOG_USEC: "1000000",
        // No cache fallback in this test: READY must wait for the control plane.
        CLAWGATE_CACHE_FALLBACK_AFTER_MS: "600000",
        CLAWGATE_WATCHDOG_MAX_EVENT_LOOP_DELAY_MS: "300",
        CLAWGATE_TEST_BLOCK_ON_SIGUSR2_MS: "2000",
      },
      { waitUntil: "healthz" },
    );
    teardown.add("data plane", () => dp.stop());
    await dpNotify.next((text) => text.startsWith("STATUS=waiting for the control plane"));
    // Pings flow while it waits (the watchdog runs from the start), but no READY.
    await dpNotify.next((text) => text === "WATCHDOG=1");
    expect(await dp.readyStatus()).toBe(503);
    expect(dpNotify.messages.map((m) => m.text)).not.toContain("READY=1");
  });

  it("control plane: READY=1 once its listeners are bound; data plane: READY=1 after the snapshot", async () => {
    cpNotify = await startNotifyListener();
    teardown.add("cp notify socket", () => cpNotify.close());
    const upstream = await startNamedUpstream("a");
    teardown.add("upstream", () => upstream.close());
    cp = await startControlPlane({ CLAWGATE_GRPC_LISTEN: cpGrpc, NOTIFY_SOCKET: cpNotify.path });
    const started = cp;
    teardown.add("control plane", () => started.stop());
    await cpNotify.next((text) => text === "READY=1");
    expect(cpNotify.messages.map((m) => m.text)).toContain(
      `STATUS=serving: admin API on ${cp.env.CLAWGATE_ADMIN_LISTEN}, snapshots on ${cpGrpc}`,
    );
    await cp.admin.putUpstream("agents", { nodes: [{ address: upstream.address, weight: 1 }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });

    await dpNotify.next((text) => text === "READY=1");
    // When READY=1 arrives the snapshot is already applied: /readyz says so at once.
    expect(await dp.readyStatus()).toBe(200);
    const applied = await dp.snapshotVersion();
    await dpNotify.next((text) => text === `STATUS=serving version ${applied}`);
    // The newest snapshot is announced too (each write is a new version).
    const latest = (await cp.admin.snapshot()).version;
    await dpNotify.next((text) => text === `STATUS=serving version ${latest}`);
    expect(await whoAnswered(`${dp.proxyUrl}/api/x`)).toBe("a");
    expect(dpNotify.messages.filter((m) => m.text === "READY=1")).toHaveLength(1);
  });

  it("data plane: WATCHDOG=1 every WATCHDOG_USEC/2 (500 ms), again and again", async () => {
    // The interval it chose, from its own log; the pacing itself is unit-tested on fake timers.
    expect(dp.process.output.grep("systemd watchdog enabled").join("\n")).toContain(
      '"intervalMs":500',
    );
    const first = await dpNotify.next((text) => text === "WATCHDOG=1", {
      from: dpNotify.messages.length,
    });
    let latest = first;
    for (let i = 0; i < 4; i++) {
      latest = await dpNotify.next((text) => text === "WATCHDOG=1", {
        from: dpNotify.messages.indexOf(latest) + 1,
      });
    }
    // A figure for the log, not a bound: a busy machine stretches it.
    console.info(`4 watchdog intervals took ${Math.round(latest.at - first.at)} ms (nominal 2000)`);
  });

  it("data plane: WATCHDOG=1 stops while the event loop is blocked, and resumes after", async () => {
    const last = await dpNotify.next((text) => text === "WATCHDOG=1", {
      from: dpNotify.messages.length,
    });
    const resumedBefore = dp.process.output.grep("watchdog pings resumed").length;
    process.kill(dp.process.pid, "SIGUSR2"); // the test hook blocks the loop for 2 s
    const resumed = await dpNotify.next((text) => text === "WATCHDOG=1", {
      from: dpNotify.messages.indexOf(last) + 1,
      timeoutMs: 10_000,
    });
    await waitFor(() => dp.process.output.grep("watchdog pings resumed").length > resumedBefore, {
      what: "the log line saying pings resumed",
    });
    // In the process's own order: the tick after the block saw the stall and withheld its
    // ping, then a later tick passed and pinged again.
    const lines = dp.process.output.text(200).split("\n");
    const failedAt = lines.findLastIndex((line) => line.includes("self-check failed"));
    const resumedAt = lines.findLastIndex((line) => line.includes("watchdog pings resumed"));
    expect(failedAt).toBeGreaterThanOrEqual(0);
    expect(lines[failedAt]).toContain("event loop stalled");
    expect(failedAt).toBeLessThan(resumedAt);
    console.info(`no WATCHDOG=1 for ${Math.round(resumed.at - last.at)} ms around a 2 s block`);
    // It is a stall, not a crash: the process kept its state and serves on.
    expect(await dp.readyStatus()).toBe(200);
  });

  it("data plane and control plane: STOPPING=1 on SIGTERM, then exit 0", async () => {
    const dpStatus = await dp.process.stop(10_000);
    expect(dpStatus).toEqual({ code: 0, signal: null });
    const dpTexts = dpNotify.messages.map((m) => m.text);
    expect(dpTexts).toContain("STOPPING=1");
    expect(dpTexts).toContain("STATUS=stopping: draining requests in flight");

    const cpStatus = await cp.process.stop(10_000);
    expect(cpStatus).toEqual({ code: 0, signal: null });
    expect(cpNotify.messages.map((m) => m.text)).toContain("STOPPING=1");
  });
});
