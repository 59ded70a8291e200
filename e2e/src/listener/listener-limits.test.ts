import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DataPlane, rawHttpRequest, startDataPlane, Teardown } from "../support/index.js";

/*
 * The proxy listener's own limits, on the built data plane: a headers timeout of its own (it
 * followed the keep-alive timeout, 65 s by default and up to an hour, so a client sending its
 * headers a byte at a time held a connection that long) and a cap on connections. No control
 * plane: the listener answers 503 CLAWGATE_NOT_READY to a whole request, enough to tell an
 * accepted connection from a refused one.
 */
describe("proxy listener limits", () => {
  const teardown = new Teardown();
  let dp: DataPlane;
  let proxy: { host: string; port: number };

  beforeAll(async () => {
    dp = await startDataPlane(
      {
        // Port 1: nothing listens there. (A port from freePort() may be handed out again as
        // the proxy's, and the snapshot client would then hold one of its connections.)
        CLAWGATE_CP_ADDRESSES: "127.0.0.1:1",
        CLAWGATE_CACHE_FALLBACK_AFTER_MS: "600000",
        CLAWGATE_PROXY_HEADERS_TIMEOUT_MS: "1000",
        CLAWGATE_PROXY_MAX_CONNECTIONS: "3",
      },
      { waitUntil: "healthz" },
    );
    const started = dp;
    teardown.add("data plane", () => started.stop());
    const url = new URL(dp.proxyUrl);
    proxy = { host: url.hostname, port: Number(url.port) };
  });

  afterAll(() => teardown.run());

  /** A connection and everything it received until it closed. */
  async function openSocket(): Promise<{ socket: Socket; received: () => string }> {
    const socket = connect(proxy.port, proxy.host);
    teardown.add("client socket", () => socket.destroy());
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      text += chunk;
    });
    socket.on("error", () => {});
    await once(socket, "connect");
    return { socket, received: () => text };
  }

  it("answers 408 and closes a connection whose headers are not complete within proxyHeadersTimeoutMs, though keep-alive is 65 s", async () => {
    const { socket, received } = await openSocket();
    socket.write("GET / HTTP/1.1\r\nHost: a.test\r\nX-Slow: ");
    await once(socket, "close");
    expect(received()).toMatch(/^HTTP\/1\.1 408 /);
    dp.process.assertRunning();
  });

  it("closes connections past proxyMaxConnections at once, unanswered, and serves again once one closes", async () => {
    // Four connections, each kept open (keep-alive) once answered: at most three are.
    const held: Socket[] = [];
    let unanswered = 0;
    for (let i = 0; i < 4; i++) {
      const { socket, received } = await openSocket();
      socket.write("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
      const closed = new Promise<"closed">((resolve) =>
        socket.once("close", () => resolve("closed")),
      );
      while (!received().includes("CLAWGATE_NOT_READY")) {
        // A refused connection is reset: its error rejects a wait for data (events.once).
        const next = once(socket, "data").catch(() => "closed" as const);
        if ((await Promise.race([next, closed])) === "closed") break;
      }
      if (received() === "") unanswered++;
      else held.push(socket);
    }
    expect(held.length).toBeLessThanOrEqual(3);
    expect(unanswered).toBeGreaterThan(0);

    for (const socket of held) {
      socket.end();
      await once(socket, "close");
    }
    // The server counts a connection gone once its side closed too; ask until it has.
    let served = 0;
    while (served === 0) {
      served = (
        await rawHttpRequest(`${proxy.host}:${proxy.port}`, ["GET / HTTP/1.1", "Host: a.test"])
      ).status;
    }
    expect(served).toBe(503);
  });
});
