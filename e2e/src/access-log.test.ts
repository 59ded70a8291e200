import { readFile, rename } from "node:fs/promises";
import { join } from "node:path";
import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSlowUpstream } from "./process-healing/slow-upstream.js";
import {
  type ControlPlane,
  type DataPlane,
  freePorts,
  makeWorkDir,
  type NamedUpstream,
  removeWorkDir,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
} from "./support/index.js";

/** Sends a request and returns the status and the request id the data plane gave it. */
async function call(url: string, headers: Record<string, string> = {}) {
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
  const body = await response.arrayBuffer();
  return {
    status: response.status,
    requestId: response.headers.get("x-request-id") ?? "",
    bodyBytes: body.byteLength,
  };
}

/** Access-log lines (`"log":"access"`) among a process's output lines. */
function accessLines(lines: readonly string[]): Record<string, unknown>[] {
  return lines.filter((l) => l.startsWith('{"log":"access"')).map((l) => JSON.parse(l));
}

describe("access log of a real data plane", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let upstream: NamedUpstream;
  let deadAddress = "";
  let workDir = "";

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    upstream = await startNamedUpstream("a");
    teardown.add("upstream a", () => upstream.close());
    // A free port nobody listens on: connections to it are refused.
    const [deadPort] = await freePorts(1);
    deadAddress = `127.0.0.1:${deadPort}`;
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("live", { nodes: [{ address: upstream.address, weight: 1 }] });
    await cp.admin.putUpstream("dead", { nodes: [{ address: deadAddress, weight: 1 }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "live" });
    await cp.admin.putRoute("down", { match: { pathPrefix: "/down" }, upstream: "dead" });
    workDir = await makeWorkDir("access-log");
    teardown.add("work dir", () => removeWorkDir(workDir));
  });

  afterAll(() => teardown.run());

  async function dataPlane(env: Record<string, string> = {}): Promise<DataPlane> {
    const dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress, ...env });
    teardown.add(dp.nodeId, () => dp.stop());
    return dp;
  }

  it("writes a line for a 200, a 404 and a 502 on stdout, with the fields and no secrets", async () => {
    const dp = await dataPlane({ CLAWGATE_ACCESS_LOG: "stdout" });
    const ok = await call(`${dp.proxyUrl}/api/hello?api_key=secret-query`, {
      authorization: "Bearer secret-token",
      cookie: "sid=secret-cookie",
    });
    const missing = await call(`${dp.proxyUrl}/nowhere`);
    const refused = await call(`${dp.proxyUrl}/down/x`);
    expect([ok.status, missing.status, refused.status]).toEqual([200, 404, 502]);

    const lineOf = async (requestId: string) =>
      waitFor(
        () => accessLines(dp.process.output.grep(requestId)).find((l) => l.requestId === requestId),
        { what: `the access-log line of ${requestId}`, timeoutMs: 10_000 },
      );
    expect(await lineOf(ok.requestId)).toMatchObject({
      method: "GET",
      path: "/api/hello",
      route: "api",
      upstream: "live",
      node: upstream.address,
      status: 200,
      attempts: 1,
      bytesIn: 0,
      bytesOut: ok.bodyBytes,
      client: "127.0.0.1",
    });
    expect(await lineOf(missing.requestId)).toMatchObject({
      path: "/nowhere",
      status: 404,
      attempts: 0,
      bytesOut: missing.bodyBytes,
    });
    expect(await lineOf(refused.requestId)).toMatchObject({
      route: "down",
      upstream: "dead",
      node: deadAddress,
      status: 502,
      failure: "refused",
    });
    expect(dp.process.output.grep("secret")).toEqual([]);
  });

  it("writes no line at all when accessLog is off", async () => {
    const dp = await dataPlane({ CLAWGATE_ACCESS_LOG: "off" });
    expect((await call(`${dp.proxyUrl}/api/hello`)).status).toBe(200);
    expect((await call(`${dp.proxyUrl}/nowhere`)).status).toBe(404);
    // A clean exit flushes whatever was buffered: after it, a missing line is really missing.
    await dp.process.stop();
    expect(accessLines(dp.process.output.grep('"log":"access"'))).toEqual([]);
  });

  it("accessLogSample 0 drops the lines of successes and keeps every error", async () => {
    const dp = await dataPlane({ CLAWGATE_ACCESS_LOG: "stdout", CLAWGATE_ACCESS_LOG_SAMPLE: "0" });
    const ok = await call(`${dp.proxyUrl}/api/hello`);
    const missing = await call(`${dp.proxyUrl}/nowhere`);
    const refused = await call(`${dp.proxyUrl}/down/x`);
    expect([ok.status, missing.status, refused.status]).toEqual([200, 404, 502]);
    // A clean exit flushes whatever was buffered: after it, a missing line is really missing.
    await dp.process.stop();
    const lines = accessLines(dp.process.output.grep('"log":"access"'));
    expect(lines.map((l) => [l.requestId, l.status])).toEqual([[refused.requestId, 502]]);
  });

  it("appends to a file and reopens it on SIGHUP, as logrotate expects", async () => {
    const path = join(workDir, "access.log");
    const dp = await dataPlane({ CLAWGATE_ACCESS_LOG: path });
    const fileHas = (file: string, requestId: string) =>
      waitFor(async () => (await readFile(file, "utf8")).includes(requestId), {
        what: `${file} to hold ${requestId}`,
        timeoutMs: 10_000,
      });
    const before = await call(`${dp.proxyUrl}/api/before`);
    await fileHas(path, before.requestId);
    // Nothing of the access log went to stdout.
    expect(dp.process.output.grep(before.requestId)).toEqual([]);

    await rename(path, `${path}.1`);
    const reopened = dp.process.output.count("access log reopened");
    process.kill(dp.process.pid, "SIGHUP");
    await waitFor(() => reopened() === 1, { what: "the reopen log line", timeoutMs: 10_000 });
    const after = await call(`${dp.proxyUrl}/api/after`);
    await fileHas(path, after.requestId);
    const rotated = await readFile(`${path}.1`, "utf8");
    expect(rotated).toContain(before.requestId);
    expect(rotated).not.toContain(after.requestId);
    const [line] = accessLines((await readFile(path, "utf8")).split("\n").filter(Boolean));
    expect(line).toMatchObject({ requestId: after.requestId, path: "/api/after", status: 200 });
    expect(dp.process.running).toBe(true);
  });

  it("writes the lines it still holds when the process exits at once (a second SIGTERM while draining)", async () => {
    // A request that outlasts the test keeps the drain open, so only the second signal ends
    // the process: process.exit() without the graceful close that writes the batch out.
    const hanging = await startSlowUpstream(30_000);
    teardown.add("hanging upstream", () => hanging.close());
    await cp.admin.putUpstream("hanging", { nodes: [{ address: hanging.address, weight: 1 }] });
    await cp.admin.putRoute("hang", { match: { pathPrefix: "/hang" }, upstream: "hanging" });
    const path = join(workDir, "exit-at-once.log");
    const dp = await dataPlane({ CLAWGATE_ACCESS_LOG: path, CLAWGATE_DRAIN_TIMEOUT_MS: "60000" });
    const answered = [];
    for (const name of ["one", "two", "three"])
      answered.push(await call(`${dp.proxyUrl}/api/${name}`));
    expect(answered.map((a) => a.status)).toEqual([200, 200, 200]);
    const stuck = fetch(`${dp.proxyUrl}/hang/x`).catch(() => undefined);
    await waitFor(() => hanging.active === 1, { what: "the hanging request at its upstream" });

    const draining = dp.process.output.count("stopping: draining requests in flight");
    process.kill(dp.process.pid, "SIGTERM");
    await waitFor(() => draining() === 1, { what: "the drain to start", timeoutMs: 10_000 });
    process.kill(dp.process.pid, "SIGTERM");
    await dp.process.exited;
    await stuck;
    expect(dp.process.output.grep("second signal while stopping; exiting now")).toHaveLength(1);

    // The lines were in the batch (written every 64 KiB or 1 s): the exit wrote them out.
    const lines = accessLines((await readFile(path, "utf8")).split("\n").filter(Boolean));
    expect(lines.map((l) => l.requestId)).toEqual(answered.map((a) => a.requestId));
  });
});
