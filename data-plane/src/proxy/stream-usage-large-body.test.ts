import type { IncomingHttpHeaders, Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAM_USAGE_BODY_LIMIT } from "../quota/stream-usage-request.js";
import { fixedProxyHandler } from "../testing/fixed-proxy.js";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { type BodyFraming, framedPost } from "../testing/plain-request.js";
import { PoolRegistry } from "../upstream/pool-registry.js";

/** What the upstream got: its headers and its body. */
interface Received {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

const USAGE_CHUNK = '"choices":[],"usage":{';

/** A streaming chat request padded with JSON whitespace to `bytes`, as a client might send. */
function paddedChat(bytes: number, fields: Record<string, unknown> = { stream: true }): Buffer {
  const head = '{"model":"m","messages":[{"role":"user","content":"hi {\\"stream\\":false}"}],';
  const tail = JSON.stringify(fields).slice(1);
  return Buffer.from(`${head}${" ".repeat(bytes - head.length - tail.length)}${tail}`);
}

// Route usage.injectStreamUsage with request bodies over STREAM_USAGE_BODY_LIMIT: never held
// whole, they are scanned as they stream upstream and get include_usage at their end, so
// padding a request past the limit does not make its tokens free.
describe("include_usage for a request body over the read limit", () => {
  const received: Received[] = [];
  const pools = new PoolRegistry();
  let upstream: { server: Server; port: number };
  let proxy: { server: Server; port: number };
  /** The byte count maxBodyBytes is set to on route "capped". */
  const capped = 2 * STREAM_USAGE_BODY_LIMIT;

  beforeAll(async () => {
    // An OpenAI-style model: a content chunk, the usage chunk when asked, [DONE].
    upstream = await listenOnLoopback((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        received.push({ headers: req.headers, body });
        const asked = (() => {
          try {
            return JSON.parse(body.toString()).stream_options?.include_usage === true;
          } catch {
            return false;
          }
        })();
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write('data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n');
        if (asked) {
          res.write('data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}\n\n');
        }
        res.end("data: [DONE]\n\n");
      });
    });
    const usage = { injectStreamUsage: true };
    const snapshot = {
      upstreams: [{ name: "model", nodes: [{ address: `127.0.0.1:${upstream.port}`, weight: 1 }] }],
      routes: [
        { name: "chat", match: { pathPrefix: "/v1" }, upstream: "model", usage },
        {
          name: "capped",
          match: { pathPrefix: "/capped" },
          upstream: "model",
          maxBodyBytes: BigInt(capped),
          usage,
        },
      ],
    };
    proxy = await listenOnLoopback(fixedProxyHandler(snapshot, pools));
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await pools.close();
    await closeLoopbackServer(upstream.server);
  });

  const post = (
    path: string,
    body: Buffer,
    framing: BodyFraming,
    /** null: no Content-Type at all. */
    contentType: string | null = "application/json",
  ) =>
    framedPost(
      proxy.port,
      path,
      body,
      framing,
      contentType === null ? {} : { "content-type": contentType },
    );

  it.each(["declared", "chunked"] as const)(
    "adds include_usage to a %s 2 MiB streaming request, sent upstream chunked",
    async (framing) => {
      const body = paddedChat(2 * STREAM_USAGE_BODY_LIMIT);
      const reply = await post("/v1/chat/completions", body, framing);
      expect(reply.status).toBe(200);
      const got = received.at(-1)!;
      expect(got.headers["transfer-encoding"]).toBe("chunked");
      expect(got.headers["content-length"]).toBeUndefined();
      expect(JSON.parse(got.body.toString())).toEqual({
        ...JSON.parse(body.toString()),
        stream_options: { include_usage: true },
      });
      // The client's bytes went as they came, the field in front of the closing brace.
      expect(got.body.subarray(0, body.length - 1).equals(body.subarray(0, -1))).toBe(true);
      // The client did not ask for usage: it gets the stream without the usage chunk.
      expect(reply.body.toString()).toContain('"content":"hi"');
      expect(reply.body.toString()).not.toContain(USAGE_CHUNK);
    },
  );

  // FastAPI/Starlette upstreams (vLLM, SGLang, LiteLLM) parse such bodies as JSON, llama.cpp and
  // Ollama ignore the type: a label must not make a stream free.
  it.each([
    [2 * STREAM_USAGE_BODY_LIMIT, "no Content-Type", null],
    [2 * STREAM_USAGE_BODY_LIMIT, "a +json type", "application/vnd.chat+json"],
    [2 * STREAM_USAGE_BODY_LIMIT, "text/plain", "text/plain"],
    [100 * 1024, "no Content-Type", null],
    [100 * 1024, "text/plain", "text/plain"],
  ])("adds include_usage to a %d-byte streaming request with %s", async (bytes, _what, type) => {
    const body = paddedChat(bytes);
    const reply = await post("/v1/chat/completions", body, "declared", type);
    expect(reply.status).toBe(200);
    expect(JSON.parse(received.at(-1)!.body.toString()).stream_options).toEqual({
      include_usage: true,
    });
    expect(reply.body.toString()).not.toContain(USAGE_CHUNK);
  });

  it("passes a body that is not a JSON object untouched, whatever its size", async () => {
    for (const bytes of [100 * 1024, 2 * STREAM_USAGE_BODY_LIMIT]) {
      const body = Buffer.alloc(bytes, "x");
      const reply = await post("/v1/upload", body, "declared", "application/octet-stream");
      expect(reply.status).toBe(200);
      expect(received.at(-1)!.body.equals(body)).toBe(true);
    }
  });

  it("merges include_usage into the client's own stream_options", async () => {
    const fields = { stream: true, stream_options: { include_obfuscation: false } };
    const body = paddedChat(2 * STREAM_USAGE_BODY_LIMIT, fields);
    const reply = await post("/v1/chat/completions", body, "declared");
    expect(reply.status).toBe(200);
    expect(JSON.parse(received.at(-1)!.body.toString()).stream_options).toEqual({
      include_obfuscation: false,
      include_usage: true,
    });
    expect(reply.body.toString()).not.toContain(USAGE_CHUNK);
  });

  it("gives the usage chunk to a client that asked for it, its body as it came", async () => {
    const fields = { stream: true, stream_options: { include_usage: true } };
    const body = paddedChat(2 * STREAM_USAGE_BODY_LIMIT, fields);
    const reply = await post("/v1/chat/completions", body, "chunked");
    expect(received.at(-1)!.body.equals(body)).toBe(true);
    expect(reply.body.toString()).toContain(USAGE_CHUNK);
  });

  // The client may have asked for the chunk in a way the gateway cannot or need not read as
  // `true`: the field is added for the budget, and the chunk is still the client's.
  it.each([
    [2 * STREAM_USAGE_BODY_LIMIT, 'include_usage "yes"', { include_usage: "yes" }],
    [100 * 1024, 'include_usage "yes"', { include_usage: "yes" }],
    [2 * STREAM_USAGE_BODY_LIMIT, "include_usage 1", { include_usage: 1 }],
    [
      2 * STREAM_USAGE_BODY_LIMIT,
      "a stream_options too large to keep",
      { include_usage: true, note: "x".repeat(5000) },
    ],
  ])(
    "gives the usage chunk to a %d-byte request whose client asked with %s",
    async (bytes, _what, options) => {
      const body = paddedChat(bytes, { stream: true, stream_options: options });
      const reply = await post("/v1/chat/completions", body, "declared");
      expect(reply.status).toBe(200);
      expect(received.at(-1)!.body.equals(body)).toBe(false);
      expect(reply.body.toString()).toContain(USAGE_CHUNK);
    },
  );

  it("passes a large request that does not stream byte for byte", async () => {
    const body = paddedChat(2 * STREAM_USAGE_BODY_LIMIT, { stream: false });
    const reply = await post("/v1/chat/completions", body, "declared");
    expect(reply.status).toBe(200);
    expect(received.at(-1)!.body.equals(body)).toBe(true);
  });

  it("counts the client's bytes against maxBodyBytes, not the field the gateway adds", async () => {
    // Exactly at the limit: the added field would take it past, had the limit counted it.
    const atLimit = await post("/capped/chat", paddedChat(capped), "chunked");
    expect(atLimit.status).toBe(200);
    expect(received.at(-1)!.body.length).toBeGreaterThan(capped);
    const over = await post("/capped/chat", paddedChat(capped + 1), "chunked");
    expect(over.status).toBe(413);
  });
});
