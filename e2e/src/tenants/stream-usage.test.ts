import { readFileSync } from "node:fs";
import { type ClientHttp2Session, connect } from "node:http2";
import { makeTestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  errorCodeOf,
  freePorts,
  h2Request,
  metricSum,
  startControlPlane,
  startDataPlane,
  Teardown,
  tenantResource,
  waitFor,
  waitForConvergence,
} from "../support/index.js";
import { type StreamingModel, startStreamingModel } from "./streaming-model.js";

const KEY = "stream-usage-key-1";
/** A tenant with a small budget, spent by streams its client cuts before the usage chunk. */
const CUTTER_KEY = "stream-usage-cutter-1";
const CUTTER_TOKENS_PER_MINUTE = 40;
/**
 * What a stream of the model's two content deltas ("hel", "lo") without its usage chunk is
 * charged for the body {"model":"m","stream":true} (27 bytes): ceil(27 / 4) = 7 for the prompt,
 * max(ceil(5 / 4), 2 events) = 2 for the output (stream-usage-estimate.ts).
 */
const CUT_STREAM_TOKENS = 9;
const USAGE_CHUNK = '"choices":[],"usage":{';

// Route usage.injectStreamUsage through a real data plane: OpenAI streams report usage only
// when asked, so the gateway asks for the client and keeps the answer from a client that did
// not ask, while the tenant's token budget is debited either way.
describe("usage.injectStreamUsage through a real data plane", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  let model: StreamingModel;
  let h2: ClientHttp2Session;

  beforeAll(async () => {
    const pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    model = await startStreamingModel();
    teardown.add("model", () => model.close());
    cp = await startControlPlane();
    teardown.add("control plane", () => cp.stop());
    const route = { upstream: "model", retry: { attempts: 0 }, auth: { tenants: "required" } };
    const write = await cp.admin.apply([
      { kind: "upstream", name: "model", spec: { nodes: [{ address: model.address }] } },
      tenantResource("streamer", KEY, { tokensPerMinute: 100_000 }),
      tenantResource("cutter", CUTTER_KEY, { tokensPerMinute: CUTTER_TOKENS_PER_MINUTE }),
      {
        kind: "route",
        name: "counted",
        spec: { ...route, match: { pathPrefix: "/v1" }, usage: { injectStreamUsage: true } },
      },
      { kind: "route", name: "plain", spec: { ...route, match: { pathPrefix: "/plain" } } },
    ]);
    const [tlsPort] = (await freePorts(1)) as [number];
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      // HTTP/2 clients reach the proxy here (ALPN h2).
      CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${tlsPort}`,
      CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
      CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
    });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
    h2 = connect(`https://127.0.0.1:${tlsPort}`, {
      ca: readFileSync(pki.caCert, "utf8"),
      servername: "localhost",
    });
    teardown.add("h2 client", () => new Promise<void>((resolve) => h2.close(resolve)));
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

  // However the client frames its body, the request costs what it used: a body without a
  // declared length is read as it arrives (up to 1 MiB, past it scanned as it streams) and gets
  // include_usage all the same.
  const streaming = { model: "m", stream: true };
  const askedUpstream = { stream_options: { include_usage: true }, ...streaming };

  it("asks for usage in a chunked HTTP/1.1 request, debits it, and keeps the chunk from the client", async () => {
    const before = await tokens();
    const text = JSON.stringify(streaming);
    const response = await fetch(`${dp.proxyUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      // A stream body has no length: fetch sends it chunked, in two pieces here.
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(text.slice(0, 8)));
          controller.enqueue(new TextEncoder().encode(text.slice(8)));
          controller.close();
        },
      }),
      duplex: "half",
      signal: AbortSignal.timeout(5_000),
    } as RequestInit);
    expect(response.status).toBe(200);
    const stream = await response.text();
    expect(model.bodies.at(-1)).toEqual(askedUpstream);
    // Sent upstream as a body of known length, as a declared one is.
    expect(model.headers.at(-1)?.["transfer-encoding"]).toBeUndefined();
    expect(model.headers.at(-1)?.["content-length"]).toBe(
      String(JSON.stringify(askedUpstream).length),
    );
    expect(stream).toContain('"content":"hel"');
    expect(stream).not.toContain(USAGE_CHUNK);
    expect((await tokens()) - before).toBe(60);
  });

  /** A chat completion POSTed as `body` over the HTTP/2 session, without content-length. */
  const chatOverH2 = (body: string) =>
    h2Request(
      h2,
      {
        ":method": "POST",
        ":path": "/v1/chat/completions",
        authorization: `Bearer ${KEY}`,
        "content-type": "application/json",
      },
      body,
    );

  it("asks for usage in an HTTP/2 request without content-length on the TLS listener", async () => {
    const before = await tokens();
    const reply = await chatOverH2(JSON.stringify(streaming));
    expect(h2.alpnProtocol).toBe("h2");
    expect(reply.headers[":status"]).toBe(200);
    expect(model.bodies.at(-1)).toEqual(askedUpstream);
    expect(model.headers.at(-1)?.["content-length"]).toBe(
      String(JSON.stringify(askedUpstream).length),
    );
    expect(reply.body).toContain('"content":"hel"');
    expect(reply.body).not.toContain(USAGE_CHUNK);
    expect((await tokens()) - before).toBe(60);
  });

  // A body over 1 MiB is never read whole: it streams upstream, scanned, and gets include_usage
  // at its end, so padding a request with JSON whitespace does not make its tokens free.
  const padded = `{"model":"m",${" ".repeat(2 * 1024 * 1024)}"stream":true}`;

  it("asks for usage in a request over 1 MiB, sends it chunked, and debits the tokens", async () => {
    const before = await tokens();
    const response = await fetch(`${dp.proxyUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      // A string body: fetch declares its length.
      body: padded,
      signal: AbortSignal.timeout(10_000),
    });
    expect(response.status).toBe(200);
    const stream = await response.text();
    expect(model.bodies.at(-1)).toEqual(askedUpstream);
    // The added field changes the length: sent upstream chunked, without the client's length.
    expect(model.headers.at(-1)?.["transfer-encoding"]).toBe("chunked");
    expect(model.headers.at(-1)?.["content-length"]).toBeUndefined();
    expect(stream).toContain('"content":"hel"');
    expect(stream).not.toContain(USAGE_CHUNK);
    expect((await tokens()) - before).toBe(60);
  });

  it("asks for usage in an HTTP/2 request over 1 MiB without content-length", async () => {
    const before = await tokens();
    const reply = await chatOverH2(padded);
    expect(reply.headers[":status"]).toBe(200);
    expect(model.bodies.at(-1)).toEqual(askedUpstream);
    expect(model.headers.at(-1)?.["transfer-encoding"]).toBe("chunked");
    expect(reply.body).not.toContain(USAGE_CHUNK);
    expect((await tokens()) - before).toBe(60);
  });

  it("leaves requests on a route without the option as they are", async () => {
    const before = await tokens();
    const stream = await chat("/plain/chat/completions", { model: "m", stream: true });
    expect(model.bodies.at(-1)).toEqual({ model: "m", stream: true });
    expect(stream).not.toContain(USAGE_CHUNK);
    // The stream reported no usage: it is charged the estimate.
    expect((await tokens()) - before).toBe(CUT_STREAM_TOKENS);
  });

  /**
   * POSTs a streaming chat to the model's `/hold/` path, which sends its content and then
   * nothing until the connection closes: the client reads both content deltas and aborts
   * before the usage chunk, as a tenant cutting each stream at its end would.
   */
  const chatCutBeforeUsage = async (key: string) => {
    const controller = new AbortController();
    const response = await fetch(`${dp.proxyUrl}/v1/hold/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(streaming),
      signal: controller.signal,
    });
    if (response.status !== 200) return { status: response.status, text: await response.text() };
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!text.includes('"content":"lo"')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before its content: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
    controller.abort();
    return { status: 200, text };
  };

  it("charges a stream the client cut before its usage chunk an estimate, not 0", async () => {
    const before = await tokens();
    const { status, text } = await chatCutBeforeUsage(KEY);
    expect(status).toBe(200);
    expect(text).not.toContain(USAGE_CHUNK);
    await waitFor(async () => (await tokens()) - before >= CUT_STREAM_TOKENS, {
      what: "the cut stream debited",
    });
    expect((await tokens()) - before).toBe(CUT_STREAM_TOKENS);
  });

  it("spends a tenant's budget with streams cut before their usage chunk", async () => {
    const cutterTokens = async () =>
      metricSum(await dp.metrics(), "clawgate_tenant_tokens_total", { tenant: "cutter" });
    // Charged 0 each, cut streams would never spend it: this would go on until it timed out.
    let cuts = 0;
    const refused = await waitFor(
      async () => {
        const answer = await chatCutBeforeUsage(CUTTER_KEY);
        if (answer.status === 429) return answer;
        expect(answer.status).toBe(200);
        cuts++;
        return undefined;
      },
      { what: "the cutter's token budget spent by cut streams", timeoutMs: 30_000 },
    );
    expect(errorCodeOf(refused.text)).toBe("CLAWGATE_TOKEN_BUDGET_EXHAUSTED");
    // Refused only once the cut streams' estimates reached the budget, each counted.
    await waitFor(async () => (await cutterTokens()) >= cuts * CUT_STREAM_TOKENS, {
      what: "every cut stream debited",
    });
    expect(await cutterTokens()).toBe(cuts * CUT_STREAM_TOKENS);
    expect(cuts * CUT_STREAM_TOKENS).toBeGreaterThanOrEqual(CUTTER_TOKENS_PER_MINUTE);
  }, 60_000);

  it("charges a stream the upstream broke before its usage chunk an estimate", async () => {
    const before = await tokens();
    const response = await fetch(`${dp.proxyUrl}/v1/break/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify(streaming),
      signal: AbortSignal.timeout(5_000),
    });
    expect(response.status).toBe(200);
    // The gateway can only cut the client's stream too.
    await expect(response.text()).rejects.toThrow();
    await waitFor(async () => (await tokens()) - before >= CUT_STREAM_TOKENS, {
      what: "the broken stream debited",
    });
    expect((await tokens()) - before).toBe(CUT_STREAM_TOKENS);
  });
});
