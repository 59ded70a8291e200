import { once } from "node:events";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import {
  create,
  type Route,
  type RouteSchema,
  SnapshotDeltaSchema,
  SnapshotSchema,
} from "@clawgate/proto";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { compileDelta } from "../compiler/compile-delta.js";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";
import { HealthRegistry, healthTargets, type Prober } from "../health/index.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import {
  type PlainReply,
  type PlainRequestOptions,
  plainRequest,
} from "../testing/plain-request.js";
import { PoolRegistry } from "../upstream/pool-registry.js";
import { createProxyHandler } from "./proxy-handler.js";
import { RequestHealing, type RequestHealingOptions } from "./request-healing.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

// The plain-object init create() takes for a Route (nested messages as plain objects too).
// @clawgate/proto does not re-export MessageInitShape and @bufbuild/protobuf is no data-plane
// dependency, so derive it from create(); the built-Route branch is dropped so that spreading
// it over defaults stays a plain init.
type RouteInit = Exclude<NonNullable<Parameters<typeof create<typeof RouteSchema>>[1]>, Route>;

interface Upstream {
  server: Server;
  port: number;
  address: string;
  /** Requests seen, with their headers. */
  seen: { method: string; url: string; headers: IncomingHttpHeaders; body: Buffer }[];
}

async function startUpstream(handler: Handler): Promise<Upstream> {
  const seen: Upstream["seen"] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        body: Buffer.concat(chunks),
      });
      handler(req, res);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  return { server, port, address: `127.0.0.1:${port}`, seen };
}

/** Probes nothing: a quarantined node stays out until the test says otherwise. */
const idleProber: Prober = { setUpstreams() {}, probeNow() {}, close: async () => {} };

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** A loopback port nothing listens on: every connect is refused. */
async function deadAddress(): Promise<string> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  await closeServer(server);
  return `127.0.0.1:${port}`;
}

interface Reply extends PlainReply {
  json: { error?: { code: string; requestId: string } } & Record<string, unknown>;
}

/** One request through the proxy, its body also parsed as JSON ({} when it is not JSON). */
async function send(
  port: number,
  path: string,
  options: Omit<PlainRequestOptions, "chunkBytes"> = {},
): Promise<Reply> {
  const reply = await plainRequest(port, path, { ...options, chunkBytes: 16 * 1024 });
  let json = {};
  try {
    json = JSON.parse(String(reply.body));
  } catch {}
  return { ...reply, json };
}

const ok: Handler = (req, res) => {
  res.writeHead(200, { "content-type": "text/plain" });
  res.end(`ok ${req.method}`);
};

describe("request-layer self-healing", () => {
  const logLines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "debug" },
    new Writable({
      write(chunk, _encoding, callback) {
        logLines.push(JSON.parse(String(chunk)));
        callback();
      },
    }),
  );
  const cleanup: (() => Promise<void>)[] = [];
  let pools: PoolRegistry;
  let registry: Registry;

  beforeAll(() => {
    pools = new PoolRegistry();
  });

  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  afterAll(async () => {
    await pools.close();
  });

  async function upstream(handler: Handler): Promise<Upstream> {
    const u = await startUpstream(handler);
    cleanup.push(() => closeServer(u.server));
    return u;
  }

  /**
   * A proxy over one upstream "svc" with `nodes` and one route "r" at "/" shaped by `route`.
   * With `health`, node health comes from a HealthRegistry whose probes never run, so a node a
   * refusal quarantined stays out of rotation.
   */
  async function proxy(
    nodes: { address: string; weight?: number }[],
    route: RouteInit = {},
    options: {
      healing?: Omit<RequestHealingOptions, "registry" | "logger">;
      breaker?: Record<string, number>;
      health?: boolean;
    } = {},
  ): Promise<{
    port: number;
    healing: RequestHealing;
    snapshot: CompiledSnapshot;
    /** Compiles version `version` of the same snapshot with other nodes. */
    compile: (version: number, nodes: { address: string }[]) => CompiledSnapshot;
    /** Makes `next` the snapshot the handler reads. */
    swap: (next: CompiledSnapshot) => void;
    /** The version the last request read. */
    lastRead: () => number | undefined;
  }> {
    const compile = (version: number, list: { address: string; weight?: number }[]) => {
      const result = compileSnapshot(
        create(SnapshotSchema, {
          version: BigInt(version),
          breakers: [{ name: "b", ...options.breaker }],
          upstreams: [
            {
              name: "svc",
              breaker: "b",
              nodes: list.map((n) => ({ address: n.address, weight: n.weight ?? 1 })),
            },
          ],
          routes: [{ name: "r", match: { pathPrefix: "/" }, upstream: "svc", ...route }],
        }),
      );
      if (!result.ok) throw new Error(result.reason);
      return result.value;
    };
    const snapshot = compile(1, nodes);
    let current = snapshot;
    let lastRead: number | undefined;
    registry = new Registry();
    let hooks: Pick<RequestHealingOptions, "nodeUsable" | "healthChanges" | "reportRefused"> = {};
    if (options.health) {
      const health = new HealthRegistry({ prober: () => idleProber });
      health.sync(healthTargets(snapshot.upstreams.values()));
      cleanup.push(() => health.close());
      hooks = {
        nodeUsable: (upstream, address) => health.isUsable(upstream, address),
        healthChanges: (listener) => health.onChange(listener),
        reportRefused: (upstream, address) => health.reportRefused(upstream, address),
      };
    }
    const healing = new RequestHealing({ registry, logger, ...hooks, ...options.healing });
    healing.sync(snapshot);
    const handler = createProxyHandler({
      current: () => {
        lastRead = current.version;
        return current;
      },
      pools,
      metrics: new ProxyMetrics(registry),
      logger,
      healing,
    });
    const server = createServer(handler);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    cleanup.push(() => closeServer(server));
    return {
      port: (server.address() as AddressInfo).port,
      healing,
      snapshot,
      compile,
      swap: (next) => {
        current = next;
      },
      lastRead: () => lastRead,
    };
  }

  async function metric(name: string, labels: Record<string, string>): Promise<number> {
    const found = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
    const values = (found?.values ?? []) as { labels: Record<string, string>; value: number }[];
    return values
      .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
      .reduce((sum, v) => sum + v.value, 0);
  }

  describe("retries", () => {
    it("retries a POST with a small body on another node after a refused connect", async () => {
      const dead = await deadAddress();
      const live = await upstream(ok);
      const { port } = await proxy(
        [{ address: dead }, { address: live.address }],
        {},
        {
          health: true,
        },
      );
      const body = Buffer.from(JSON.stringify({ order: 42 }));
      const reply = await send(port, "/orders", {
        method: "POST",
        body,
        headers: { "content-length": String(body.length), "x-request-id": "req-retry-1" },
      });
      expect(reply.status).toBe(200);
      expect(String(reply.body)).toBe("ok POST");
      expect(live.seen).toHaveLength(1);
      expect(live.seen[0]!.body.equals(body)).toBe(true);
      expect(live.seen[0]!.headers["x-clawgate-retry"]).toBe("1");
      expect(live.seen[0]!.headers["x-request-id"]).toBe("req-retry-1");
      expect(reply.headers["x-request-id"]).toBe("req-retry-1");
      expect(await metric("clawgate_retries_total", { upstream: "svc", reason: "refused" })).toBe(
        1,
      );
      expect(
        logLines.find((l) => l.requestId === "req-retry-1" && l.kind === "refused"),
      ).toMatchObject({ node: dead, attempt: 1 });

      // The refusing node is quarantined: the next request goes straight to the live one.
      const next = await send(port, "/orders", {
        method: "POST",
        body,
        headers: { "content-length": String(body.length) },
      });
      expect(next.status).toBe(200);
      expect(live.seen[1]!.headers["x-clawgate-retry"]).toBeUndefined();
      expect(await metric("clawgate_retries_total", { upstream: "svc" })).toBe(1);
    });

    it("retries a chunked body of unknown length that nobody read yet", async () => {
      const dead = await deadAddress();
      const live = await upstream(ok);
      const { port } = await proxy([{ address: dead }, { address: live.address }]);
      const body = Buffer.alloc(40 * 1024, 3);
      const reply = await send(port, "/", { method: "POST", body });
      expect(reply.status).toBe(200);
      expect(live.seen[0]!.body.equals(body)).toBe(true);
    });

    it("does not retry a POST whose declared body is over the replay limit: 502", async () => {
      const dead = await deadAddress();
      const live = await upstream(ok);
      const { port } = await proxy([{ address: dead }, { address: live.address }]);
      const body = Buffer.alloc(1024 * 1024, 7);
      const reply = await send(port, "/upload", {
        method: "POST",
        body,
        headers: { "content-length": String(body.length) },
      });
      expect(reply.status).toBe(502);
      expect(reply.json.error?.code).toBe("CLAWGATE_UPSTREAM_CONNECT_FAILED");
      expect(live.seen).toHaveLength(0);
    });

    it("retries a 5xx GET only when the route lists 5xx, and never a POST", async () => {
      const failing = await upstream((_req, res) => {
        res.writeHead(500, { "content-type": "text/plain" });
        res.end("boom");
      });
      const live = await upstream(ok);
      const nodes = [{ address: failing.address, weight: 10 }, { address: live.address }];

      const plain = await proxy(nodes, { retry: { attempts: 2, on: ["connect-failure"] } });
      const noRetry = await send(plain.port, "/a");
      expect(noRetry.status).toBe(500);
      expect(String(noRetry.body)).toBe("boom");
      expect(live.seen).toHaveLength(0);

      const with5xx = await proxy(nodes, {
        retry: { attempts: 2, on: ["connect-failure", "5xx"] },
      });
      const retried = await send(with5xx.port, "/b", { headers: { "x-request-id": "five-1" } });
      expect(retried.status).toBe(200);
      expect(live.seen).toHaveLength(1);
      expect(live.seen[0]!.headers["x-clawgate-retry"]).toBe("1");
      expect(failing.seen.at(-1)!.headers["x-request-id"]).toBe("five-1");
      expect(live.seen[0]!.headers["x-request-id"]).toBe("five-1");
      expect(
        await metric("clawgate_upstream_errors_total", { upstream: "svc", kind: "status_5xx" }),
      ).toBe(1);

      const post = await send(with5xx.port, "/c", { method: "POST", body: Buffer.from("x") });
      expect(post.status).toBe(500);
      expect(live.seen).toHaveLength(1);
    });

    it("stops when every node was tried: 2 nodes, 2 attempts, however many retries allowed", async () => {
      const seen: string[] = [];
      const a = await upstream((_req, res) => {
        seen.push("a");
        res.writeHead(502).end();
      });
      const b = await upstream((_req, res) => {
        seen.push("b");
        res.writeHead(503).end();
      });
      const { port } = await proxy([{ address: a.address }, { address: b.address }], {
        retry: { attempts: 5, on: ["5xx"] },
      });
      const reply = await send(port, "/");
      expect(reply.status).toBe(503);
      expect(seen.sort()).toEqual(["a", "b"]);
    });

    it("holds retries of requests the upstream saw to its budget", async () => {
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const failing = await upstream((_req, res) => res.writeHead(500).end());
      const slow = await upstream((_req, res) => {
        void released.then(() => res.end("slow"));
      });
      const { port } = await proxy(
        [{ address: failing.address, weight: 10 }, { address: slow.address }],
        { retry: { attempts: 2, on: ["5xx"] } },
        // One retry in flight at a time, whatever the load.
        { healing: { retryBudget: { ratio: 0, minConcurrent: 1 } } },
      );
      const first = send(port, "/one");
      // The first request's retry holds the only slot while the slow node keeps it waiting.
      await waitUntil(() => slow.seen.length === 1);
      const second = await send(port, "/two", { headers: { "x-request-id": "denied-1" } });
      expect(second.status).toBe(500);
      expect(String(second.body)).toBe("");
      expect(
        logLines.find(
          (l) =>
            l.requestId === "denied-1" &&
            l.kind === "status_5xx" &&
            String(l.msg).includes("budget"),
        ),
      ).toBeDefined();
      release();
      expect((await first).status).toBe(200);
      expect(slow.seen).toHaveLength(1);
      expect(failing.seen).toHaveLength(2);
      expect(
        await metric("clawgate_retries_total", { upstream: "svc", reason: "status_5xx" }),
      ).toBe(1);
    });

    it("does not count resending what the upstream never got against the budget", async () => {
      const dead = await deadAddress();
      const live = await upstream(ok);
      const { port } = await proxy(
        [{ address: dead }, { address: live.address }],
        {},
        {
          // No health registry: the refusing node stays in rotation, so every request meets it.
          healing: { retryBudget: { ratio: 0, minConcurrent: 0 } },
        },
      );
      for (let i = 0; i < 3; i++) expect((await send(port, "/")).status).toBe(200);
      expect(
        await metric("clawgate_retries_total", { upstream: "svc", reason: "refused" }),
      ).toBeGreaterThanOrEqual(1);
    });
  });

  describe("timeouts", () => {
    it("answers 504 when totalMs runs out across retries, aborting the attempt in flight", async () => {
      const hang: Handler = () => {};
      const nodes = [await upstream(hang), await upstream(hang), await upstream(hang)];
      const { port } = await proxy(
        nodes.map((n) => ({ address: n.address })),
        {
          retry: { attempts: 2, on: ["timeout"] },
          // A GET's header deadline fires on time (headers-deadline.ts), and the backoffs
          // after attempts 1 and 2 stay under 25 and 50 ms: two attempts of 0.5 s leave the
          // total (1.2 s) to cut the third short, or its backoff when timers run late.
          timeouts: { connectMs: 1000, headersMs: 500, bodyMs: 1000, totalMs: 1200 },
        },
      );
      const reply = await send(port, "/", { headers: { "x-request-id": "total-1" } });
      expect(reply.status).toBe(504);
      expect(reply.json.error?.code).toBe("CLAWGATE_UPSTREAM_TIMEOUT");
      // The log says which deadline ended each attempt: the first its own header timeout, the
      // last the total, so the total cut the retries short (no elapsed time is compared).
      const lines = logLines.filter((l) => l.requestId === "total-1");
      expect(lines[0]).toMatchObject({ kind: "header_timeout", attempt: 1 });
      expect(lines[0]!.totalTimeoutMs).toBeUndefined();
      expect(lines.at(-1)).toMatchObject({ kind: "header_timeout", totalTimeoutMs: 1200 });
      // The attempt the total cut short was sent, to a node not tried before.
      const hits = nodes.map((n) => n.seen.length);
      expect(hits.reduce((a, b) => a + b)).toBe(lines.at(-1)!.attempt);
      expect(Math.max(...hits)).toBe(1);
      expect(await metric("clawgate_requests_total", { route: "r", code: "504" })).toBe(1);
    });
  });

  describe("breaker", () => {
    it("opens on failures, answers 503 with Retry-After without contacting the upstream, closes through half-open", async () => {
      let healthy = false;
      const svc = await upstream((_req, res) => {
        res.writeHead(healthy ? 200 : 500).end(healthy ? "fine" : "");
      });
      const clock = new FakeClock(1_000_000);
      const { port } = await proxy(
        [{ address: svc.address }],
        { retry: { attempts: 0, on: [] } },
        {
          healing: { clock },
          breaker: { minRequests: 2, failureRatio: 0.5, cooldownMs: 10_000, halfOpenSuccesses: 2 },
        },
      );
      expect((await send(port, "/")).status).toBe(500);
      expect((await send(port, "/")).status).toBe(500);
      expect(svc.seen).toHaveLength(2);

      const open = await send(port, "/");
      expect(open.status).toBe(503);
      expect(open.json.error?.code).toBe("CLAWGATE_BREAKER_OPEN");
      // 10 s cooldown plus up to 10 % jitter, in whole seconds.
      expect(Number(open.headers["retry-after"])).toBeGreaterThanOrEqual(10);
      expect(Number(open.headers["retry-after"])).toBeLessThanOrEqual(11);
      expect(String(open.body)).not.toContain(svc.address);
      expect(svc.seen).toHaveLength(2);
      expect(await metric("clawgate_breaker_state", { upstream: "svc" })).toBe(2);
      expect(await metric("clawgate_breaker_rejections_total", { upstream: "svc" })).toBe(1);
      expect(
        await metric("clawgate_upstream_errors_total", { upstream: "svc", kind: "breaker_open" }),
      ).toBe(1);
      expect(
        logLines.find((l) => l.upstream === "svc" && l.from === "closed" && l.to === "open"),
      ).toMatchObject({ reason: "failure_ratio" });
      // A fast failure is a debug line; the transition above is the warn.
      const fastFails = logLines.filter((l) => l.kind === "breaker_open");
      expect(fastFails.length).toBeGreaterThan(0);
      expect(fastFails.every((l) => l.level === 20)).toBe(true);

      clock.advance(5_000);
      const later = await send(port, "/");
      expect(later.status).toBe(503);
      expect(Number(later.headers["retry-after"])).toBeLessThanOrEqual(6);
      expect(svc.seen).toHaveLength(2);

      healthy = true;
      clock.advance(6_100);
      expect((await send(port, "/")).status).toBe(200); // probe 1
      expect(await metric("clawgate_breaker_state", { upstream: "svc" })).toBe(1);
      expect((await send(port, "/")).status).toBe(200); // probe 2 closes it
      expect(await metric("clawgate_breaker_state", { upstream: "svc" })).toBe(0);
      expect(svc.seen).toHaveLength(4);
      expect(
        await metric("clawgate_breaker_transitions_total", {
          upstream: "svc",
          from: "half-open",
          to: "closed",
        }),
      ).toBe(1);
    });

    it("keeps a breaker's state across a snapshot swap", async () => {
      const svc = await upstream((_req, res) => res.writeHead(500).end());
      const clock = new FakeClock(0);
      const other = await upstream(ok);
      const { port, healing, snapshot, compile, swap, lastRead } = await proxy(
        [{ address: svc.address }],
        { retry: { attempts: 0, on: [] } },
        { healing: { clock }, breaker: { minRequests: 1, failureRatio: 0.5, cooldownMs: 60_000 } },
      );
      await send(port, "/");
      expect(healing.breakers.find("svc")?.state).toBe("open");

      // A new version with another node list: new compiled upstream, picker and route objects.
      const next = compile(2, [{ address: svc.address }, { address: other.address }]);
      expect(next.upstreams.get("svc")).not.toBe(snapshot.upstreams.get("svc"));
      swap(next);
      healing.sync(next);
      expect(healing.breakers.find("svc")?.state).toBe("open");
      const reply = await send(port, "/");
      expect(lastRead()).toBe(2);
      expect(reply.status).toBe(503);
      expect(reply.json.error?.code).toBe("CLAWGATE_BREAKER_OPEN");
      expect(other.seen).toHaveLength(0);
    });

    it("honours 429 Retry-After as binding: nothing is sent before it passes", async () => {
      let throttle = true;
      const svc = await upstream((_req, res) => {
        if (throttle) res.writeHead(429, { "retry-after": "3" }).end("slow down");
        else res.writeHead(200).end("ok");
      });
      const clock = new FakeClock(0);
      const { port } = await proxy([{ address: svc.address }], {}, { healing: { clock } });
      const first = await send(port, "/");
      expect(first.status).toBe(429);
      expect(first.headers["retry-after"]).toBe("3");
      throttle = false;

      const blocked = await send(port, "/");
      expect(blocked.status).toBe(503);
      expect(blocked.json.error?.code).toBe("CLAWGATE_UPSTREAM_COOLDOWN");
      expect(blocked.headers["retry-after"]).toBe("3");
      clock.advance(2_500);
      expect((await send(port, "/")).headers["retry-after"]).toBe("1");
      expect(svc.seen).toHaveLength(1);
      expect(await metric("clawgate_breaker_retry_after_skips_total", { upstream: "svc" })).toBe(2);

      clock.advance(500);
      expect((await send(port, "/")).status).toBe(200);
      expect(svc.seen).toHaveLength(2);
    });

    it("honours an HTTP-date Retry-After on a 503", async () => {
      // The proxy reads the date against its clock: a fake one, so the answer is exact however
      // long the requests take.
      const clock = new FakeClock(Date.parse("2026-01-01T00:00:00Z"));
      const svc = await upstream((_req, res) => {
        const date = new Date(clock.now() + 20_000).toUTCString();
        res.writeHead(503, { "retry-after": date }).end();
      });
      const { port } = await proxy(
        [{ address: svc.address }],
        { retry: { attempts: 2, on: ["5xx"] } },
        { healing: { clock } },
      );
      expect((await send(port, "/")).status).toBe(503);
      clock.advance(2_000);
      const blocked = await send(port, "/");
      expect(blocked.json.error?.code).toBe("CLAWGATE_UPSTREAM_COOLDOWN");
      expect(blocked.headers["retry-after"]).toBe("18");
      expect(svc.seen).toHaveLength(1);
    });
  });

  describe("degradation", () => {
    it("serves the last good GET marked stale while the upstream fails; writes fail fast", async () => {
      let up = true;
      const svc = await upstream((req, res) => {
        if (!up) {
          res.writeHead(500).end("down");
          return;
        }
        res.writeHead(200, { "content-type": "application/json", "x-version": "1" });
        res.end(JSON.stringify({ path: req.url, fresh: true }));
      });
      const clock = new FakeClock(0);
      const { port } = await proxy(
        [{ address: svc.address }],
        { fallback: { staleIfErrorSeconds: 60 }, retry: { attempts: 0, on: [] } },
        { healing: { clock } },
      );
      const fresh = await send(port, "/catalog?page=2");
      expect(fresh.status).toBe(200);
      expect(fresh.headers["x-clawgate-cache"]).toBeUndefined();

      up = false;
      clock.advance(7_000);
      const stale = await send(port, "/catalog?page=2", { headers: { "x-request-id": "st-1" } });
      expect(stale.status).toBe(200);
      expect(stale.json).toEqual({ path: "/catalog?page=2", fresh: true });
      expect(stale.headers["x-clawgate-cache"]).toBe("stale");
      expect(stale.headers.age).toBe("7");
      expect(stale.headers["x-version"]).toBe("1");
      expect(stale.headers["x-request-id"]).toBe("st-1");
      expect(svc.seen).toHaveLength(2);

      // Another query is another key: nothing cached, the upstream's 500 passes.
      expect((await send(port, "/catalog?page=3")).status).toBe(500);
      // Writes never get a cached answer.
      expect(
        (await send(port, "/catalog?page=2", { method: "POST", body: Buffer.from("x") })).status,
      ).toBe(500);

      // Past staleIfErrorSeconds the copy is not served any more.
      clock.advance(60_000);
      expect((await send(port, "/catalog?page=2")).status).toBe(500);
    });

    it("serves stale while the breaker is open, and 503 for what it has no copy of", async () => {
      const svc = await upstream((req, res) => {
        if (req.url === "/warm") res.writeHead(200).end("warm copy");
        else res.writeHead(500).end();
      });
      const { port } = await proxy(
        [{ address: svc.address }],
        { fallback: { staleIfErrorSeconds: 60 }, retry: { attempts: 0, on: [] } },
        { breaker: { minRequests: 2, failureRatio: 0.5, cooldownMs: 60_000 } },
      );
      expect(String((await send(port, "/warm")).body)).toBe("warm copy");
      await send(port, "/x");
      await send(port, "/x");
      await send(port, "/x");
      const hits = svc.seen.length;
      const stale = await send(port, "/warm");
      expect(String(stale.body)).toBe("warm copy");
      expect(stale.headers["x-clawgate-cache"]).toBe("stale");
      const none = await send(port, "/cold");
      expect(none.status).toBe(503);
      expect(none.json.error?.code).toBe("CLAWGATE_BREAKER_OPEN");
      expect(svc.seen).toHaveLength(hits);
    });

    it("never serves a response to a request with credentials to another client", async () => {
      let up = true;
      const svc = await upstream((req, res) => {
        if (!up) {
          res.writeHead(500).end("down");
          return;
        }
        // No Cache-Control: nothing in the response says it is private.
        res.writeHead(200).end(`for ${req.headers.authorization ?? req.headers.cookie}`);
      });
      const { port } = await proxy(
        [{ address: svc.address }],
        { fallback: { staleIfErrorSeconds: 60 }, retry: { attempts: 0, on: [] } },
        { healing: { clock: new FakeClock(0) } },
      );
      const alice = await send(port, "/me", { headers: { authorization: "Bearer alice" } });
      expect(String(alice.body)).toBe("for Bearer alice");
      const carol = await send(port, "/session", { headers: { cookie: "sid=carol" } });
      expect(String(carol.body)).toBe("for sid=carol");

      up = false;
      const bob = await send(port, "/me");
      expect(bob.status).toBe(500);
      expect(String(bob.body)).not.toContain("alice");
      expect((await send(port, "/session")).status).toBe(500);
      // Not even the same credentials get a copy: the cache never kept one.
      expect((await send(port, "/me", { headers: { authorization: "Bearer alice" } })).status).toBe(
        500,
      );
    });

    it("does not store a response that varies by request headers", async () => {
      let up = true;
      const svc = await upstream((_req, res) => {
        if (!up) res.writeHead(500).end("down");
        else if (_req.url === "/star") res.writeHead(200, { vary: "*" }).end("any");
        else res.writeHead(200, { vary: "Accept-Language" }).end("de");
      });
      const { port } = await proxy(
        [{ address: svc.address }],
        { fallback: { staleIfErrorSeconds: 60 }, retry: { attempts: 0, on: [] } },
        { healing: { clock: new FakeClock(0) } },
      );
      expect((await send(port, "/star")).status).toBe(200);
      expect((await send(port, "/lang")).status).toBe(200);
      up = false;
      expect((await send(port, "/star")).status).toBe(500);
      expect((await send(port, "/lang")).status).toBe(500);
    });

    it("answers 503 CLAWGATE_NO_HEALTHY_NODE with Retry-After while every node is quarantined", async () => {
      const dead = await deadAddress();
      const { port } = await proxy([{ address: dead }], {}, { health: true });
      expect((await send(port, "/")).status).toBe(502);
      const reply = await send(port, "/");
      expect(reply.status).toBe(503);
      expect(reply.json.error?.code).toBe("CLAWGATE_NO_HEALTHY_NODE");
      expect(reply.headers["retry-after"]).toBe("1");
      // Failing fast: the quarantined node was not dialled again.
      expect(
        await metric("clawgate_upstream_errors_total", { upstream: "svc", kind: "refused" }),
      ).toBe(1);
    });
  });
});

async function waitUntil(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("RequestHealing.sync after a delta", () => {
  it("keeps the rotation of every upstream the delta did not touch", () => {
    const base = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        breakers: [{ name: "b" }],
        upstreams: ["one", "two"].map((name) => ({
          name,
          breaker: "b",
          nodes: [
            { address: `10.0.0.1:80`, weight: 2 },
            { address: `10.0.0.2:80`, weight: 1 },
          ],
        })),
        routes: [{ name: "r", match: { pathPrefix: "/" }, upstream: "one" }],
      }),
    );
    if (!base.ok || !(base.value instanceof FrozenCompiledSnapshot)) throw new Error("no base");
    const healing = new RequestHealing({
      registry: new Registry(),
      logger: pino({ level: "silent" }),
    });
    healing.sync(base.value);
    const pick = (upstream: string) => healing.upstream(upstream)!.picker.pick()!.address;
    // Smooth WRR over weights 2:1 goes .1, .2, .1 and then again.
    expect([pick("one"), pick("two")]).toEqual(["10.0.0.1:80", "10.0.0.1:80"]);

    // A one-route change: upstream "one" is the same compiled object, "two" changed.
    const next = compileDelta(
      base.value,
      create(SnapshotDeltaSchema, {
        version: 2n,
        baseVersion: 1n,
        routes: [{ name: "r", priority: 5, match: { pathPrefix: "/" }, upstream: "one" }],
        upstreams: [{ name: "two", breaker: "b", nodes: [{ address: "10.0.0.3:80", weight: 1 }] }],
      }),
    );
    if (!next.ok) throw new Error(next.reason);
    healing.sync(next.value);
    // Rebuilt, "one" would start over at .1; kept, it goes on where it was.
    expect(pick("one")).toBe("10.0.0.2:80");
    expect(pick("two")).toBe("10.0.0.3:80");
  });
});
