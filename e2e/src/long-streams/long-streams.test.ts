import { request } from "node:http";
import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";
import { type StreamUpstream, startStreamUpstream } from "./stream-upstream.js";

/** What a client read of a streamed response, and how the stream ended. */
interface StreamRead {
  status: number;
  body: string;
  /** "end": the response completed; "cut": the connection closed before its end. */
  ending: "end" | "cut";
}

function readStream(url: string, headers: Record<string, string> = {}): Promise<StreamRead> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, ending: "end" }));
      res.on("error", () => resolve({ status: res.statusCode ?? 0, body, ending: "cut" }));
      res.on("aborted", () => resolve({ status: res.statusCode ?? 0, body, ending: "cut" }));
    });
    req.on("error", reject);
    req.end();
  });
}

const TOTAL_MS = 1_000;
const EVENTS = 8;
// Eight events 200 ms apart span 1.4 s at least: past the route's totalMs, whatever the load.
const GAP_MS = 200;

describe("long streams through the data plane (etcd, control plane, data plane, upstream)", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let upstream: StreamUpstream;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    upstream = await startStreamUpstream();
    teardown.add("stream upstream", () => upstream.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("streams", { nodes: [{ address: upstream.address, weight: 1 }] });
    // bodyMs under the events' gap: an SSE client's stream is bounded by streamIdleMs instead.
    await cp.admin.putRoute("sse", {
      match: { pathPrefix: "/sse" },
      upstream: "streams",
      timeouts: { totalMs: TOTAL_MS, bodyMs: 100 },
    });
    // Only the stream-idle cut can end this one: totalMs and bodyMs are far longer.
    await cp.admin.putRoute("idle", {
      match: { pathPrefix: "/idle" },
      upstream: "streams",
      timeouts: { totalMs: 60_000, bodyMs: 60_000, streamIdleMs: 300 },
    });
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp]);
  });

  afterAll(() => teardown.run());

  it("an SSE stream whose events span longer than the route's totalMs is delivered whole", async () => {
    const read = await readStream(`${dp.proxyUrl}/sse/events?count=${EVENTS}&gapMs=${GAP_MS}`, {
      accept: "text/event-stream",
    });
    expect(read.status).toBe(200);
    expect(read.ending).toBe("end");
    const ids = [...read.body.matchAll(/^data: event (\d+)$/gm)].map((match) => Number(match[1]));
    expect(ids).toEqual(Array.from({ length: EVENTS }, (_, i) => i));
    expect(dp.process.output.grep("upstream request failed")).toEqual([]);
  });

  it("a chunked stream silent for streamIdleMs is cut, and the log says body_timeout", async () => {
    const read = await readStream(`${dp.proxyUrl}/idle/silent`);
    expect(read.status).toBe(200);
    expect(read.body).toBe('{"token":"first"}\n');
    expect(read.ending).toBe("cut");
    await waitFor(
      () => dp.process.output.grep("upstream request failed: body_timeout").length > 0,
      {
        what: "the body_timeout log line of the idle stream",
      },
    );
  });
});
