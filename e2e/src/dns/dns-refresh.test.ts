import { once } from "node:events";
import { createServer, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  freePort,
  metricValue,
  send,
  startControlPlane,
  startDataPlane,
  startTestDnsServer,
  Teardown,
  type TestDnsServer,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

/**
 * An upstream on one loopback address: answers its name; /slow waits until released; counts
 * the probes' /healthz.
 */
async function startBackend(name: string, host: string, port: number) {
  const held: ServerResponse[] = [];
  let probes = 0;
  let slowArrived: () => void = () => {};
  const arrived = new Promise<void>((resolve) => {
    slowArrived = resolve;
  });
  const server: Server = createServer((req, res) => {
    if (req.url === "/healthz") probes++;
    if (req.url === "/api/slow") {
      held.push(res);
      slowArrived();
      return;
    }
    res.end(name);
  });
  server.listen(port, host);
  await once(server, "listening");
  return {
    server,
    get probes() {
      return probes;
    },
    /** Resolves once a /slow request is being held. */
    slowArrived: arrived,
    release: () => {
      for (const res of held.splice(0)) res.end(`${name} slow`);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// A node given as a DNS name, resolved by the data plane through the DNS server of its
// dnsServers setting (a test server on 127.0.0.1), moves from 127.0.0.2 to 127.0.0.3 while
// a client keeps the data plane's connection to it busy: the data plane follows within
// dnsRefreshMs, and the request in flight on the old address still finishes there.
// With workers, each proxy worker keeps its own connections and resolves the name itself.
describe.each([1, 2])("upstream nodes named by DNS (workers: %i)", (workers) => {
  const teardown = new Teardown();
  let dns: TestDnsServer;
  let cp: ControlPlane;
  let dp: DataPlane;
  let a: Awaited<ReturnType<typeof startBackend>>;
  let b: Awaited<ReturnType<typeof startBackend>>;
  let port: number;

  beforeAll(async () => {
    port = await freePort();
    a = await startBackend("a", "127.0.0.2", port);
    teardown.add("backend a", () => a.close());
    b = await startBackend("b", "127.0.0.3", port);
    teardown.add("backend b", () => b.close());
    dns = await startTestDnsServer();
    teardown.add("dns server", () => dns.close());
    dns.set("backend.test", "127.0.0.2");
    cp = await startControlPlane({});
    teardown.add("control plane", () => cp.stop());
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_DNS_SERVERS: dns.address,
      CLAWGATE_DNS_REFRESH_MS: "300",
      CLAWGATE_WORKERS: String(workers),
    });
    teardown.add("data plane", () => dp.stop());
    const applied = await cp.admin.apply([
      {
        kind: "upstream",
        name: "named",
        spec: {
          nodes: [{ address: `backend.test:${port}` }],
          // Probes resolve the name through dnsServers too, or they would evict the node.
          healthCheck: { intervalMs: 200, path: "/healthz" },
        },
      },
      { kind: "route", name: "api", spec: { match: { pathPrefix: "/api" }, upstream: "named" } },
    ]);
    await waitForConvergence(cp, [dp], {
      atLeast: (applied.body as { revision: number }).revision,
    });
  });

  afterAll(() => teardown.run());

  it("probes the node at the address its name resolves to, through the same DNS servers", async () => {
    await waitFor(() => a.probes >= 3, { what: "three probes to reach 127.0.0.2" });
    const healthy = metricValue(await dp.metrics(), "clawgate_upstream_node_healthy", {
      upstream: "named",
      node: `backend.test:${port}`,
    });
    expect(healthy).toBe(1);
  });

  it("follows a changed record on a busy connection, finishing the request in flight", async () => {
    const url = `${dp.proxyUrl}/api/who`;
    // One connection held by a slow request, a second one for the rest: with both open, no
    // new connection (which would resolve the name again by itself) is needed from here on.
    const slow = send(`${dp.proxyUrl}/api/slow`);
    await a.slowArrived;
    expect((await send(url)).text).toBe("a");

    dns.set("backend.test", "127.0.0.3");
    // Requests back to back keep the data plane's connection busy: it never idles out.
    await waitFor(async () => (await send(url)).text === "b", {
      what: "answers from the new address",
      timeoutMs: 15_000,
    });
    expect(dns.queries("backend.test")).toBeGreaterThan(1);
    // The request on the old address was not cut: it finishes there.
    a.release();
    const answer = await slow;
    expect(answer.status).toBe(200);
    expect(answer.text).toBe("a slow");
    // And from now on everything goes to the new address, whichever worker answers.
    let inARow = 0;
    await waitFor(
      async () => {
        inARow = (await send(url)).text === "b" ? inARow + 1 : 0;
        return inARow >= 6;
      },
      { what: "six answers in a row from the new address", timeoutMs: 15_000 },
    );
  });
});
