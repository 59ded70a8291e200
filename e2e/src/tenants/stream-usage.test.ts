import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  metricSum,
  startControlPlane,
  startDataPlane,
  Teardown,
  tenantResource,
  waitForConvergence,
} from "../support/index.js";
import { type StreamingModel, startStreamingModel } from "./streaming-model.js";

const KEY = "stream-usage-key-1";
const USAGE_CHUNK = '"choices":[],"usage":{';

// Route usage.injectStreamUsage through a real data plane: OpenAI streams report usage only
// when asked, so the gateway asks for the client and keeps the answer from a client that did
// not ask, while the tenant's token budget is debited either way.
describe("usage.injectStreamUsage through a real data plane", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  let model: StreamingModel;

  beforeAll(async () => {
    model = await startStreamingModel();
    teardown.add("model", () => model.close());
    cp = await startControlPlane();
    teardown.add("control plane", () => cp.stop());
    const route = { upstream: "model", retry: { attempts: 0 }, auth: { tenants: "required" } };
    const write = await cp.admin.apply([
      { kind: "upstream", name: "model", spec: { nodes: [{ address: model.address }] } },
      tenantResource("streamer", KEY, { tokensPerMinute: 100_000 }),
      {
        kind: "route",
        name: "counted",
        spec: { ...route, match: { pathPrefix: "/v1" }, usage: { injectStreamUsage: true } },
      },
      { kind: "route", name: "plain", spec: { ...route, match: { pathPrefix: "/plain" } } },
    ]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
  }, 60_000);

  afterAll(() => teardown.run(), 30_000);

  const chat = async (path: string, body: object) => {
    const response = await fetch(`${dp.proxyUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(5_000),
    });
    expect(response.status).toBe(200);
    return response.text();
  };
  const tokens = async () =>
    metricSum(await dp.metrics(), "clawgate_tenant_tokens_total", { tenant: "streamer" });

  it("asks the upstream for usage, debits it, and keeps the usage chunk from a client that did not ask", async () => {
    const before = await tokens();
    const stream = await chat("/v1/chat/completions", { model: "m", stream: true });
    expect(model.bodies.at(-1)).toEqual({
      stream_options: { include_usage: true },
      model: "m",
      stream: true,
    });
    expect(stream).toContain('"content":"hel"');
    expect(stream).not.toContain(USAGE_CHUNK);
    expect(stream.endsWith("data: [DONE]\n\n")).toBe(true);
    expect((await tokens()) - before).toBe(60);
  });

  it("passes the usage chunk to a client that asked for it", async () => {
    const before = await tokens();
    const asked = { model: "m", stream: true, stream_options: { include_usage: true } };
    const stream = await chat("/v1/chat/completions", asked);
    expect(model.bodies.at(-1)).toEqual(asked);
    expect(stream).toContain(USAGE_CHUNK);
    expect((await tokens()) - before).toBe(60);
  });

  it("leaves requests on a route without the option as they are", async () => {
    const before = await tokens();
    const stream = await chat("/plain/chat/completions", { model: "m", stream: true });
    expect(model.bodies.at(-1)).toEqual({ model: "m", stream: true });
    expect(stream).not.toContain(USAGE_CHUNK);
    // The stream reported no usage: nothing to debit.
    expect((await tokens()) - before).toBe(0);
  });
});
