import { createServer, type RequestListener, type Server } from "node:http";
import { type AddressInfo, createServer as createTcpServer, type Socket } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_PROBE_BODY_BYTES, probeNode } from "./probe.js";
import type { ProbeSpec } from "./probe-protocol.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** An HTTP server on loopback; closed after the test. */
async function httpServer(handler: RequestListener): Promise<number> {
  const server = createServer(handler);
  return listen(server);
}

/** A TCP server that accepts and then never writes a byte. */
async function silentServer(): Promise<number> {
  return (await countingSilentServer()).port;
}

/** A silent server that also tells how many connections it has accepted. */
async function countingSilentServer(): Promise<{ port: number; accepted: () => number }> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createTcpServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on("error", () => {});
  });
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
  });
  return { port: await listen(server), accepted: () => accepted };
}

async function listen(server: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        if ("closeAllConnections" in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}

/** A port nothing listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const json =
  (status: number, body: unknown): RequestListener =>
  (req, res) => {
    if (req.url !== "/healthz") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };

function spec(port: number, overrides: Partial<ProbeSpec> = {}): ProbeSpec {
  return {
    host: "127.0.0.1",
    port,
    timeoutMs: 2_000,
    path: "/healthz",
    expectStatus: "ok",
    ...overrides,
  };
}

describe("probeNode", () => {
  it("passes a node whose /healthz answers 200 with status ok", async () => {
    const port = await httpServer(json(200, { status: "ok", uptime: 12 }));
    const outcome = await probeNode(spec(port));
    expect(outcome.ok).toBe(true);
    expect(outcome.evidence).toMatchObject({ httpStatus: 200, bodyStatus: "ok" });
    expect(outcome.evidence.tcpMs).toBeGreaterThanOrEqual(0);
    expect(outcome.evidence.error).toBeUndefined();
  });

  it("fails a closed port at the TCP stage with ECONNREFUSED", async () => {
    const port = await closedPort();
    const outcome = await probeNode(spec(port));
    expect(outcome).toMatchObject({ ok: false, evidence: { error: "ECONNREFUSED" } });
    expect(outcome.evidence.tcpMs).toBeUndefined();
    expect(outcome.evidence.httpStatus).toBeUndefined();
  });

  it("fails a squatter that accepts TCP but answers 500", async () => {
    const port = await httpServer(json(500, { status: "ok" }));
    const outcome = await probeNode(spec(port));
    expect(outcome.ok).toBe(false);
    expect(outcome.evidence).toMatchObject({ httpStatus: 500, error: "http 500" });
    expect(outcome.evidence.tcpMs).toBeGreaterThanOrEqual(0);
  });

  it("fails a squatter that answers 200 with status degraded", async () => {
    const port = await httpServer(json(200, { status: "degraded" }));
    const outcome = await probeNode(spec(port));
    expect(outcome.ok).toBe(false);
    expect(outcome.evidence).toMatchObject({
      httpStatus: 200,
      bodyStatus: "degraded",
      error: 'status "degraded"',
    });
    expect(outcome.evidence.tcpMs).toBeGreaterThanOrEqual(0);
  });

  it("fails a server that accepts but never answers, within the timeout", async () => {
    const server = await countingSilentServer();
    // Sockets are real; the probe's timers and clock are stepped by hand, so the test sees
    // when the deadline falls without measuring anything.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      let outcome: Awaited<ReturnType<typeof probeNode>> | undefined;
      const probing = probeNode(spec(server.port, { timeoutMs: 300 })).then((o) => {
        outcome = o;
      });
      // The connect "takes" 200 ms of the 300 ms budget.
      vi.advanceTimersByTime(200);
      // The TCP stage connected and closed; the HTTP stage is connected and waiting.
      // (vi.waitFor would step the faked clock; setImmediate is left real.)
      while (server.accepted() < 2) await new Promise((resolve) => setImmediate(resolve));
      // One deadline covers TCP and HTTP: 100 ms are left, not a fresh 300 ms.
      vi.advanceTimersByTime(99);
      await Promise.resolve();
      expect(outcome).toBeUndefined();
      vi.advanceTimersByTime(1);
      // Settled on this step: a per-stage deadline would still be 200 ms away.
      await new Promise((resolve) => setImmediate(resolve));
      expect(outcome).toBeDefined();
      await probing;
      expect(outcome).toMatchObject({ ok: false, evidence: { error: "http timeout" } });
      expect(outcome?.evidence.tcpMs).toBeGreaterThanOrEqual(0);
      expect(outcome?.durationMs).toBe(300);
    } finally {
      vi.useRealTimers();
    }
  });

  it("with no path, a TCP connect is enough", async () => {
    const port = await silentServer();
    const outcome = await probeNode(spec(port, { path: "" }));
    expect(outcome.ok).toBe(true);
    expect(outcome.evidence.httpStatus).toBeUndefined();
    expect(outcome.evidence.tcpMs).toBeGreaterThanOrEqual(0);
  });

  it("with no expected status, any 2xx passes and the body is not read", async () => {
    const port = await httpServer((_req, res) => res.writeHead(204).end());
    expect(await probeNode(spec(port, { expectStatus: "" }))).toMatchObject({
      ok: true,
      evidence: { httpStatus: 204 },
    });
    const failing = await httpServer((_req, res) => res.writeHead(503).end("down"));
    expect(await probeNode(spec(failing, { expectStatus: "" }))).toMatchObject({
      ok: false,
      evidence: { httpStatus: 503, error: "http 503" },
    });
  });

  it("fails a body that is not JSON or has no status", async () => {
    const text = await httpServer((_req, res) => res.writeHead(200).end("OK"));
    expect((await probeNode(spec(text))).evidence.error).toBe("body is not JSON");
    const noStatus = await httpServer(json(200, { healthy: true }));
    expect((await probeNode(spec(noStatus))).evidence.error).toBe("body has no string status");
  });

  it("stops reading a body over 64 KiB", async () => {
    const port = await httpServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: "ok", pad: "x".repeat(MAX_PROBE_BODY_BYTES) }));
    });
    expect(await probeNode(spec(port))).toMatchObject({
      ok: false,
      evidence: { httpStatus: 200, error: "body over 64 KiB" },
    });
  });

  it("never sends a path that is not origin-form, and says why", async () => {
    let connections = 0;
    const server = createTcpServer((socket) => {
      connections++;
      socket.destroy();
    });
    const port = await listen(server);
    const cases: [string, RegExp][] = [
      ["/health z", /a space at 7/],
      ["/healthz\r\nX-Injected: 1", /a control character \(U\+000D\) at 8/],
      ["/h\u00e9alth", /a non-ASCII character \(U\+00E9\)/],
      ["/healthz#top", /"#" at 8/],
      ["healthz", /must start with "\/"/],
    ];
    for (const [path, reason] of cases) {
      const outcome = await probeNode(spec(port, { path }));
      expect(outcome.ok, path).toBe(false);
      expect(outcome.evidence.error, path).toMatch(reason);
      expect(outcome.evidence.error, path).toMatch(/not sent$/);
    }
    expect(connections).toBe(0);
  });

  it("sends an origin-form path with its query as written", async () => {
    const seen: string[] = [];
    const port = await httpServer((req, res) => {
      seen.push(req.url ?? "");
      res.writeHead(200).end(JSON.stringify({ status: "ok" }));
    });
    expect((await probeNode(spec(port, { path: "/status?deep=1&x=%20" }))).ok).toBe(true);
    expect(seen).toEqual(["/status?deep=1&x=%20"]);
  });

  it("asks for the configured path on a fresh connection that it closes", async () => {
    const seen: { url?: string; connection?: string }[] = [];
    const port = await httpServer((req, res) => {
      seen.push({ url: req.url, connection: req.headers.connection });
      res.writeHead(200).end(JSON.stringify({ status: "ready" }));
    });
    const outcome = await probeNode(spec(port, { path: "/health/deep", expectStatus: "ready" }));
    expect(outcome.ok).toBe(true);
    expect(seen).toEqual([{ url: "/health/deep", connection: "close" }]);
  });
});
