import type { IncomingMessage, ServerResponse } from "node:http";
import { gunzipSync, gzipSync } from "node:zlib";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scriptedModel } from "../fleet-quota/scripted-model.js";
import {
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import {
  type ControlPlane,
  type DataPlane,
  errorCodeOf,
  metricSum,
  startControlPlane,
  startDataPlane,
  Teardown,
  tenantResource,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

const ZIPPED_KEY = "zipped-tenant-key-1";

/**
 * The scripted model's answers (60 tokens on /json and /sse), always gzip-compressed whatever
 * the request's Accept-Encoding, as an upstream that ignores it would; records what was asked.
 */
function gzipModel(acceptEncodings: (string | undefined)[]) {
  return (req: IncomingMessage, res: ServerResponse) => {
    acceptEncodings.push(req.headers["accept-encoding"]);
    const chunks: Buffer[] = [];
    const capture = {
      setHeader: (name: string, value: string) => res.setHeader(name, value),
      write: (chunk: string) => chunks.push(Buffer.from(chunk)),
      end: (chunk?: string) => {
        if (chunk !== undefined) chunks.push(Buffer.from(chunk));
        res.setHeader("content-encoding", "gzip");
        res.end(gzipSync(Buffer.concat(chunks)));
      },
    };
    scriptedModel(req, capture as unknown as ServerResponse);
  };
}

// Review 20b H1 with real processes: a client that sends Accept-Encoding: gzip (as httpx and
// the OpenAI SDK do) to an upstream that compresses must still spend its token budget.
describe("token usage of compressed responses through a real data plane", () => {
  const teardown = new Teardown();
  const acceptEncodings: (string | undefined)[] = [];
  let cp: ControlPlane;
  let dp: DataPlane;
  let model: ScriptedUpstream;
  const agent = new Agent({ pipelining: 0 });

  beforeAll(async () => {
    model = await startScriptedUpstream(gzipModel(acceptEncodings));
    teardown.add("model upstream", () => model.close());
    teardown.add("client agent", () => agent.close());
    cp = await startControlPlane();
    teardown.add("control plane", () => cp.stop());
    const write = await cp.admin.apply([
      { kind: "upstream", name: "model", spec: { nodes: [{ address: model.address }] } },
      tenantResource("zipped", ZIPPED_KEY, { tokensPerDay: 100 }),
      {
        kind: "route",
        name: "api",
        spec: {
          match: { pathPrefix: "/v1" },
          upstream: "model",
          retry: { attempts: 0 },
          auth: { tenants: "required" },
        },
      },
    ]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
  }, 60_000);

  afterAll(() => teardown.run(), 30_000);

  const call = async (path: string) => {
    const response = await request(`${dp.proxyUrl}${path}`, {
      dispatcher: agent,
      reset: true,
      headers: { authorization: `Bearer ${ZIPPED_KEY}`, "accept-encoding": "gzip" },
    });
    const body = Buffer.from(await response.body.arrayBuffer());
    return { status: response.statusCode, headers: response.headers, body };
  };

  it("counts gzip JSON and SSE usage, spends the budget, and asks upstream for identity", async () => {
    // Each call reports 60 tokens of a 100-token budget: spend until the data plane refuses.
    const served: string[] = [];
    let refused: Awaited<ReturnType<typeof call>> | undefined;
    await waitFor(
      async () => {
        const path = served.length % 2 === 0 ? "/v1/chat/json" : "/v1/chat/sse";
        const response = await call(path);
        if (response.status === 429) {
          refused = response;
          return true;
        }
        expect(response.status).toBe(200);
        // The client gets the upstream's bytes as sent, still compressed.
        expect(response.headers["content-encoding"]).toBe("gzip");
        expect(gunzipSync(response.body).toString()).toContain('"total_tokens":60');
        served.push(path);
        return false;
      },
      { what: "the token budget spent by compressed responses", timeoutMs: 20_000 },
    );
    expect(errorCodeOf(refused!.body.toString())).toBe("CLAWGATE_TOKEN_BUDGET_EXHAUSTED");
    expect(served).toContain("/v1/chat/sse");
    // Every response served was counted at its 60 tokens, JSON and SSE alike.
    const tokens = async () =>
      metricSum(await dp.metrics(), "clawgate_tenant_tokens_total", { tenant: "zipped" });
    await waitFor(async () => (await tokens()) >= 60 * served.length, {
      what: "the compressed responses' tokens counted",
      timeoutMs: 10_000,
    });
    expect(await tokens()).toBe(60 * served.length);
    // The data plane asked for an uncompressed body in place of the client's gzip.
    expect(acceptEncodings.length).toBe(served.length);
    expect(new Set(acceptEncodings)).toEqual(new Set(["identity"]));
  }, 60_000);
});
