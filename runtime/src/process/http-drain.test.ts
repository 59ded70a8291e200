import { once } from "node:events";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { HttpDrain } from "./http-drain.js";

const servers: Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.closeAllConnections();
});

/** A server whose every response waits for `release()`; `arrived` counts requests seen. */
async function slowServer() {
  const waiting: (() => void)[] = [];
  let arrived = 0;
  let onArrive = () => {};
  const server = createServer((_req, res) => {
    arrived++;
    onArrive();
    waiting.push(() => {
      // The raw-array form of writeHead, as the proxy uses: the drain header must survive it.
      res.writeHead(200, ["content-type", "text/plain"]);
      res.end("done");
    });
  });
  servers.push(server);
  const drain = new HttpDrain(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    drain,
    port,
    release: () => {
      for (const finish of waiting.splice(0)) finish();
    },
    arrivals: (count: number) =>
      new Promise<void>((resolve) => {
        onArrive = () => {
          if (arrived >= count) resolve();
        };
        onArrive();
      }),
  };
}

function get(port: number, agent: import("node:http").Agent | false = false) {
  return new Promise<{ status: number; connection: string | undefined; body: string }>(
    (resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path: "/", agent }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          body += chunk;
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }),
        );
      });
      req.on("error", reject);
      req.end();
    },
  );
}

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}

describe("HttpDrain", () => {
  it("lets requests in flight finish, refuses new connections, then resolves", async () => {
    const { drain, port, release, arrivals } = await slowServer();
    const inFlight = [get(port), get(port), get(port)];
    await arrivals(3);
    expect(drain.inFlight).toBe(3);

    const drained = drain.drain(5_000);
    expect(drain.draining).toBe(true);
    expect(await refused(port)).toBe(true);
    release();
    const answers = await Promise.all(inFlight);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(answers.map((answer) => answer.body)).toEqual(["done", "done", "done"]);
    expect(await drained).toEqual({ drained: true, cut: 0 });
  });

  it("closes idle keep-alive connections at once and says Connection: close to late requests", async () => {
    const { drain, port, release, arrivals, server } = await slowServer();
    const { Agent } = await import("node:http");
    const agent = new Agent({ keepAlive: true, maxSockets: 2 });
    // Two keep-alive sockets: one ends idle, the other carries a request across the drain.
    const warm = [get(port, agent), get(port, agent)];
    await arrivals(2);
    release();
    await Promise.all(warm);
    const busy = get(port, agent);
    await arrivals(3);

    const drained = drain.drain(5_000);
    // The idle socket is gone without waiting for the busy one.
    const connections = () =>
      new Promise<number>((resolve) => server.getConnections((_err, count) => resolve(count)));
    while ((await connections()) > 1) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(drain.inFlight).toBe(1);
    release();
    const answer = await busy;
    expect(answer.status).toBe(200);
    expect(await drained).toEqual({ drained: true, cut: 0 });
    agent.destroy();
  });

  it("says Connection: close on a response written after the drain began", async () => {
    const { drain, port, release, arrivals } = await slowServer();
    const { Agent } = await import("node:http");
    const agent = new Agent({ keepAlive: true });
    const first = get(port, agent);
    await arrivals(1);
    const drained = drain.drain(5_000);
    release();
    expect(await first).toMatchObject({ status: 200, connection: "close" });
    expect(await drained).toEqual({ drained: true, cut: 0 });
    agent.destroy();
  });

  it("cuts what is still running at the deadline and reports how many", async () => {
    const { drain, port, arrivals } = await slowServer();
    const stuck = get(port).catch((err: Error) => err);
    await arrivals(1);
    expect(await drain.drain(50)).toEqual({ drained: false, cut: 1 });
    expect(await stuck).toBeInstanceOf(Error);
  });

  it("adds no listener and no property to a request or its response before the drain", async () => {
    // The proxy's hot path: per-request work on each response (a listener, a property that
    // changes its hidden class) would be paid on every request for a drain that rarely runs.
    const seen = async (withDrain: boolean) => {
      let shape: { closeListeners: number; keys: number; requestListeners: number } | undefined;
      const server = createServer((req, res) => {
        shape = {
          closeListeners: res.listenerCount("close") + req.listenerCount("close"),
          keys: Reflect.ownKeys(res).length + Reflect.ownKeys(req).length,
          requestListeners: server.listenerCount("request"),
        };
        res.end("ok");
      });
      servers.push(server);
      const drain = withDrain ? new HttpDrain(server) : undefined;
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      expect((await get((server.address() as AddressInfo).port)).status).toBe(200);
      if (drain !== undefined) expect(await drain.drain(1_000)).toEqual({ drained: true, cut: 0 });
      return shape;
    };
    const plain = await seen(false);
    expect(await seen(true)).toEqual(plain);
  });
});
