import { EventEmitter } from "node:events";
import {
  type EncodedOrResponse,
  HEALTH_CHANGES_HEADER,
  type NodeHealthReport,
  type StreamSnapshotsRequest,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { HealthRegistry } from "../health/health-registry.js";
import type { HealthTarget } from "../health/health-targets.js";
import type { ProbeResult } from "../health/prober/probe-protocol.js";
import { SnapshotClient } from "./snapshot-client.js";

/*
 * Changes-only health reports on the snapshot stream (issue 9): a data plane sends them only to
 * a control plane whose response headers say it takes them, and its whole view first after
 * every Hello; to an older control plane it sends whole views, as before.
 */

type ServerCall = grpc.ServerDuplexStream<StreamSnapshotsRequest, EncodedOrResponse>;

/** A control plane reduced to the stream's health reports, with or without the header. */
class HealthControlPlane {
  readonly reports: { stream: number; report: NodeHealthReport }[] = [];
  readonly events = new EventEmitter();
  readonly #server = new grpc.Server();
  #streams = 0;
  address = "";

  /**
   * `headers`: "changes" sends HEALTH_CHANGES_HEADER at once; "plain" headers without it (an
   * older control plane that sent a message); "none" no headers at all (an older control plane
   * with nothing to send).
   */
  constructor(headers: "changes" | "plain" | "none") {
    this.#server.addService(snapshotServiceDefinition, {
      streamSnapshots: (call: ServerCall) => {
        const stream = this.#streams++;
        const metadata = new grpc.Metadata();
        if (headers === "changes") metadata.set(HEALTH_CHANGES_HEADER, "1");
        if (headers !== "none") call.sendMetadata(metadata);
        call.on("error", () => {});
        call.on("data", (request: StreamSnapshotsRequest) => {
          if (request.message.case !== "health") return;
          this.reports.push({ stream, report: request.message.value });
          this.events.emit("change");
        });
      },
    });
  }

  async start(): Promise<this> {
    const port = await new Promise<number>((resolve, reject) =>
      this.#server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    this.address = `127.0.0.1:${port}`;
    return this;
  }

  /** Each report as "whole: ..." or "changes: ...", node by node. */
  lines(stream = 0): string[] {
    return this.reports
      .filter((r) => r.stream === stream)
      .map(({ report }) => {
        const nodes = report.nodes.map((n) => `${n.address} ${n.state}`);
        const removed = report.removed.map((n) => `-${n.address}`);
        return `${report.changesOnly ? "changes" : "whole"}: ${[...removed, ...nodes].join(", ")}`;
      });
  }

  until(probe: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (!probe()) return;
        this.events.off("change", check);
        resolve();
      };
      this.events.on("change", check);
      check();
    });
  }

  shutdown(): void {
    this.#server.forceShutdown();
  }
}

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function controlPlane(headers: "changes" | "plain" | "none"): Promise<HealthControlPlane> {
  const cp = await new HealthControlPlane(headers).start();
  cleanup.push(() => cp.shutdown());
  return cp;
}

function node(address: string): HealthTarget {
  const [host = "", port = "0"] = address.split(":");
  return { upstream: "agents", address, host, port: Number(port), healthCheck: {} };
}

/** A data plane's registry (probes delivered by the test) and its snapshot client. */
function dataPlane(addresses: string[]) {
  const clock = new FakeClock(1_000);
  let deliver: (result: ProbeResult) => void = () => {};
  const health = new HealthRegistry({
    clock,
    syncTurnMs: Number.POSITIVE_INFINITY,
    prober: (onResults) => {
      deliver = (result) => onResults([result]);
      return { setUpstreams() {}, probeNow() {}, async close() {} };
    },
  });
  const client = new SnapshotClient({
    addresses,
    nodeId: "dp-1",
    hostname: "host-1",
    softwareVersion: "0.1.0-test",
    apply: () => ({ ok: true }),
    lastAppliedVersion: () => 0,
    logger: pino({ level: "silent" }),
    backoff: { baseMs: 1, maxMs: 20 },
    health,
  });
  // As the data plane's pacer does, without its interval: every change is reported.
  health.onChange(() => client.reportHealth());
  cleanup.push(() => client.stop());
  cleanup.push(() => health.close());
  const fail = (address: string) => {
    clock.advance(10);
    deliver({
      type: "result",
      upstream: "agents",
      address,
      ok: false,
      evidence: { error: "ECONNREFUSED" },
      durationMs: 1,
      at: clock.now(),
      ticket: Number.MAX_SAFE_INTEGER,
    });
  };
  return { client, health, fail };
}

describe("health reports on the snapshot stream", () => {
  it("sends the whole view after Hello, then only what changed, to a control plane that takes changes", async () => {
    const cp = await controlPlane("changes");
    const dp = dataPlane([cp.address]);
    dp.health.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    dp.client.start();
    await cp.until(() => cp.reports.length === 1);
    // The headers may come just after the whole view went.
    await vi.waitFor(() => expect(dp.client.healthChangesOnly()).toBe(true));

    dp.health.reportRefused("agents", "10.0.0.1:80");
    dp.fail("10.0.0.1:80");
    dp.fail("10.0.0.1:80");
    dp.health.sync([node("10.0.0.1:80"), node("10.0.0.3:80")]);
    dp.client.reportHealth();
    await cp.until(() => cp.reports.length === 4);
    expect(cp.lines()).toEqual([
      "whole: 10.0.0.1:80 healthy, 10.0.0.2:80 healthy",
      "changes: 10.0.0.1:80 quarantined",
      "changes: 10.0.0.1:80 evicted",
      "changes: -10.0.0.2:80, 10.0.0.3:80 healthy",
    ]);
  });

  it.each(["plain", "none"] as const)(
    "sends only whole views to a control plane without the header (headers: %s)",
    async (headers) => {
      const cp = await controlPlane(headers);
      const dp = dataPlane([cp.address]);
      dp.health.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
      dp.client.start();
      await cp.until(() => cp.reports.length === 1);
      expect(dp.client.healthChangesOnly()).toBe(false);
      dp.fail("10.0.0.2:80");
      dp.fail("10.0.0.2:80");
      await cp.until(() => cp.reports.length === 2);
      expect(cp.lines()).toEqual([
        "whole: 10.0.0.1:80 healthy, 10.0.0.2:80 healthy",
        "whole: 10.0.0.1:80 healthy, 10.0.0.2:80 evicted",
      ]);
    },
  );

  it("starts again from the whole view on the next control plane after a reconnect", async () => {
    const first = await controlPlane("changes");
    const second = await controlPlane("changes");
    const dp = dataPlane([first.address, second.address]);
    dp.health.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    dp.client.start();
    await first.until(() => first.reports.length === 1);
    dp.fail("10.0.0.1:80");
    dp.fail("10.0.0.1:80");
    await first.until(() => first.reports.length === 2);
    first.shutdown();
    // Changed while no stream was open: the next whole view carries it.
    dp.fail("10.0.0.2:80");
    dp.fail("10.0.0.2:80");

    await second.until(() => second.reports.length === 1);
    await vi.waitFor(() => expect(dp.client.healthChangesOnly()).toBe(true));
    dp.health.sync([node("10.0.0.1:80")]);
    dp.client.reportHealth();
    await second.until(() => second.reports.length === 2);
    expect(second.lines()).toEqual([
      "whole: 10.0.0.1:80 evicted, 10.0.0.2:80 evicted",
      "changes: -10.0.0.2:80",
    ]);
  });
});
