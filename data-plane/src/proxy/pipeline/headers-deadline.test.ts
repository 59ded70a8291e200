import type { Server } from "node:http";
import { Writable } from "node:stream";
import { create, SnapshotSchema } from "@clawgate/proto";
import pino from "pino";
import { Registry } from "prom-client";
import { type Dispatcher, Pool } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileSnapshot } from "../../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../../compiler/compiled-types.js";
import { ProxyMetrics } from "../../metrics/proxy-metrics.js";
import { closeLoopbackServer, listenOnLoopback } from "../../testing/loopback-server.js";
import { plainRequest } from "../../testing/plain-request.js";
import { PoolRegistry } from "../../upstream/pool-registry.js";
import { createProxyHandler } from "../proxy-handler.js";
import { sweepKeepsHeadersDeadline } from "./headers-deadline.js";

describe("sweepKeepsHeadersDeadline", () => {
  it.each([
    // headersMs, bodyMs, hasBody, kept by the sweep
    [15_000, 30_000, false, true],
    [15_000, 0, false, true], // body timeout off: undici then holds no timer at all
    [15_000, 15_000, false, false], // equal: undici refreshes its one timer anyway
    [30_000, 15_000, false, false], // undici's timer set to bodyMs would fire first
    [0, 30_000, false, false], // no headers timeout to keep
    [15_000, 30_000, true, false], // undici restarts it when the body is written
  ])("headers %i ms, body %i ms, body sent %s: %s", (headersMs, bodyMs, hasBody, expected) => {
    expect(sweepKeepsHeadersDeadline(headersMs, bodyMs, hasBody)).toBe(expected);
  });
});

describe("headers timeout kept by the pipeline", () => {
  const logLines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "warn" },
    new Writable({
      write(chunk, _encoding, done) {
        logLines.push(JSON.parse(String(chunk)));
        done();
      },
    }),
  );
  /** What each dispatch asked undici for, by path. */
  const asked = new Map<string, { headersTimeout?: number | null; bodyTimeout?: number | null }>();
  let upstream: { server: Server; port: number };
  let proxy: { server: Server; port: number };
  let pools: PoolRegistry;
  let compiled: CompiledSnapshot;

  beforeAll(async () => {
    upstream = await listenOnLoopback((req, res) => {
      if (req.url === "/hang") return; // never answers
      if (req.url === "/late-body") {
        // Headers at once, the body well after headersMs but within bodyMs.
        res.writeHead(200, { "content-type": "text/plain" });
        res.flushHeaders();
        setTimeout(() => res.end("late but fine"), 450);
        return;
      }
      req.resume();
      req.on("end", () => res.end("ok"));
    });
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [{ name: "up", nodes: [{ address: `127.0.0.1:${upstream.port}`, weight: 1 }] }],
        routes: [
          {
            name: "no-body-timeout",
            match: { pathPrefix: "/hang" },
            upstream: "up",
            timeouts: { headersMs: 150, bodyMs: 0 },
          },
          {
            name: "patient-body",
            match: { pathPrefix: "/late-body" },
            upstream: "up",
            timeouts: { headersMs: 150, bodyMs: 10_000 },
          },
          {
            name: "defaults",
            match: { pathPrefix: "/" },
            upstream: "up",
            timeouts: { headersMs: 15_000, bodyMs: 30_000 },
          },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    compiled = result.value;
    pools = new PoolRegistry({
      factory: (origin, options) =>
        new (class extends Pool {
          override dispatch(
            opts: Dispatcher.DispatchOptions,
            handler: Dispatcher.DispatchHandler,
          ): boolean {
            asked.set(opts.path, {
              headersTimeout: opts.headersTimeout,
              bodyTimeout: opts.bodyTimeout,
            });
            return super.dispatch(opts, handler);
          }
        })(origin, options),
    });
    proxy = await listenOnLoopback(
      createProxyHandler({
        current: () => compiled,
        pools,
        metrics: new ProxyMetrics(new Registry()),
        logger,
      }),
    );
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await pools.close();
    await closeLoopbackServer(upstream.server);
  });

  it("gives undici one timeout for both phases of a request without a body", async () => {
    expect((await plainRequest(proxy.port, "/plain")).status).toBe(200);
    expect(asked.get("/plain")).toEqual({ headersTimeout: 30_000, bodyTimeout: 30_000 });
    // With a body undici keeps headersMs itself, as before.
    const posted = await plainRequest(proxy.port, "/posted", {
      method: "POST",
      body: Buffer.from("x"),
    });
    expect(posted.status).toBe(200);
    expect(asked.get("/posted")).toEqual({ headersTimeout: 15_000, bodyTimeout: 30_000 });
  });

  it("answers 504 with undici's header timeout error when no headers come in headersMs", async () => {
    const reply = await plainRequest(proxy.port, "/hang");
    expect(reply.status).toBe(504);
    const body = JSON.parse(String(reply.body));
    expect(body.error.code).toBe("CLAWGATE_UPSTREAM_TIMEOUT");
    expect(logLines.find((line) => line.requestId === body.error.requestId)).toMatchObject({
      kind: "header_timeout",
      err: { code: "UND_ERR_HEADERS_TIMEOUT" },
    });
  });

  it("stops the headers deadline when the headers arrive: a slower body is bodyMs's to judge", async () => {
    const reply = await plainRequest(proxy.port, "/late-body");
    expect(reply.status).toBe(200);
    expect(String(reply.body)).toBe("late but fine");
  });
});
