import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  loggedAs,
  startWorkerGateway,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

const NOT_APPLIED = "update not applied: the data plane is stopping (its workers drain)";
const HUNG = "proxy worker hung; killing it (SIGKILL) and starting another";

/**
 * A snapshot that arrives while the workers drain: a draining worker answers no apply until it
 * exits, so one started then would find it "hung" after workerApplyTimeoutMs and SIGKILL it,
 * cutting the requests it was letting finish.
 */
describe("a data plane with workers that takes a snapshot while stopping", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  /** Requests the held upstream has not answered yet (its /healthz is answered at once). */
  const held: ServerResponse[] = [];
  const upstream = createServer((request, response) => {
    request.resume();
    if (request.url === "/healthz") response.end('{"status":"ok"}');
    else held.push(response);
  });

  beforeAll(async () => {
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    teardown.add("held upstream", async () => {
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
    });
    ({ cp, dp } = await startWorkerGateway(teardown, {
      dataPlaneEnv: {
        // Far below the drain: an apply waiting on it would find the worker "hung" soon.
        CLAWGATE_WORKER_APPLY_TIMEOUT_MS: "1000",
        CLAWGATE_DRAIN_TIMEOUT_MS: "60000",
      },
    }));
    const { port } = upstream.address() as AddressInfo;
    await cp.admin.putUpstream("held", { nodes: [{ address: `127.0.0.1:${port}`, weight: 1 }] });
    const write = await cp.admin.putRoute("slow", {
      match: { pathPrefix: "/slow" },
      upstream: "held",
    });
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1, timeoutMs: 60_000 });
  }, 180_000);

  afterAll(() => teardown.run());

  it("starts no apply, so the worker draining a request is not killed as hung", async () => {
    const answer = fetch(`${dp.proxyUrl}/slow/x`).then(
      async (response) => `${response.status} ${await response.text()}`,
      (error: unknown) => `failed: ${String(error)}`,
    );
    await waitFor(() => held.length === 1, { what: "the request to reach the held upstream" });
    process.kill(dp.process.pid, "SIGTERM");
    await waitFor(() => loggedAs(dp, "stopping: draining requests in flight").length > 0, {
      what: "the data plane to start stopping",
    });
    // A change while the workers drain: the control plane streams it to this data plane.
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api/v2" }, upstream: "a" });
    await waitFor(() => loggedAs(dp, NOT_APPLIED).length + loggedAs(dp, HUNG).length > 0, {
      what: "the update to be turned away, or a worker killed as hung",
      timeoutMs: 30_000,
    });
    for (const response of held.splice(0)) response.end("held");
    expect(await answer).toBe("200 held");
    expect(loggedAs(dp, HUNG)).toEqual([]);
    expect(await dp.process.exited).toEqual({ code: 0, signal: null });
  }, 120_000);
});
