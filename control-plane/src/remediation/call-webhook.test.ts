import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { callWebhook } from "./call-webhook.js";

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse, body: string) => void) {
  server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => handler(req, res, body));
  });
  const listening = server;
  await new Promise<void>((resolve) => listening.listen(0, "127.0.0.1", resolve));
  const { port } = listening.address() as AddressInfo;
  return `http://127.0.0.1:${port}/hooks/restart?token=s3cret`;
}

const payload = {
  upstream: "agents",
  node: "10.0.0.5:9001",
  host: "10.0.0.5",
  port: 9001,
  evidence: "evicted",
};

describe("callWebhook", () => {
  it("POSTs the node as JSON and takes a 2xx as ok", async () => {
    const seen: { method?: string; type?: string; body?: unknown }[] = [];
    const url = await serve((req, res, body) => {
      seen.push({ method: req.method, type: req.headers["content-type"], body: JSON.parse(body) });
      res.writeHead(202).end("restarting");
    });
    const result = await callWebhook(url, payload, { timeoutMs: 5_000 });
    expect(result).toEqual({ outcome: "ok", evidence: "webhook answered HTTP 202: restarting" });
    expect(seen).toEqual([{ method: "POST", type: "application/json", body: payload }]);
  });

  it("fails on a non-2xx answer without naming the URL", async () => {
    const url = await serve((_req, res) => res.writeHead(500).end("boom"));
    const result = await callWebhook(url, payload, { timeoutMs: 5_000 });
    expect(result).toEqual({ outcome: "failed", evidence: "webhook answered HTTP 500: boom" });
    expect(result.evidence).not.toContain("s3cret");
  });

  it("times out a webhook that does not answer", async () => {
    const url = await serve(() => undefined);
    const result = await callWebhook(url, payload, { timeoutMs: 200 });
    expect(result).toEqual({
      outcome: "timeout",
      evidence: "webhook did not answer within 200 ms",
    });
  });

  it("reads a bounded part of an answer that never ends, and cancels the rest", async () => {
    let sent = 0;
    let closed = false;
    const url = await serve((_req, res) => {
      res.writeHead(200);
      res.on("close", () => {
        closed = true;
      });
      // Writes for as long as anyone reads: an answer with no end.
      const more = () => {
        while (!closed && res.write("x".repeat(1024))) sent += 1024;
        if (!closed) res.once("drain", more);
      };
      more();
    });
    const result = await callWebhook(url, payload, { timeoutMs: 5_000 });
    expect(result.outcome).toBe("ok");
    expect(result.evidence).toMatch(/^webhook answered HTTP 200: …x+$/);
    expect(sent).toBeGreaterThan(0);
  });

  it("an abort (leadership lost) ends the call as failed, not as a timeout", async () => {
    const url = await serve(() => undefined);
    const abort = new AbortController();
    const calling = callWebhook(url, payload, { timeoutMs: 600_000, signal: abort.signal });
    abort.abort();
    expect(await calling).toEqual({
      outcome: "failed",
      evidence: "webhook call aborted (leadership lost or stopping)",
    });
  });
});
