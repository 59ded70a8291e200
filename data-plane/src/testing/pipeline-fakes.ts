import { EventEmitter } from "node:events";
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { create, SnapshotSchema } from "@clawgate/proto";
import pino from "pino";
import { Registry } from "prom-client";
import { FakeClock } from "../clock/clock.js";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { FailureKind } from "../errors/failure-kind.js";
import type { StaleEntry } from "../fallback/stale-cache.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { Exchange } from "../proxy/pipeline/exchange.js";
import type { ProxyDeps } from "../proxy/pipeline/proxy-deps.js";
import type { Dispatch, Failure, StageController, StageHandler } from "../proxy/pipeline/stage.js";
import { RequestHealing, type RequestHealingOptions } from "../proxy/request-healing.js";
import { PoolRegistry } from "../upstream/pool-registry.js";
import type { RouteInit } from "./route-table-fixture.js";

/** Everything a stage test needs: real healing state on a fake clock, a real metrics registry. */
export interface StageWorld {
  clock: FakeClock;
  registry: Registry;
  deps: ProxyDeps;
  /** A fresh exchange for route "r" to upstream "u" (nodes a:1, b:1, c:1 unless given). */
  exchange(options?: { method?: string; staleKey?: string; req?: IncomingMessage }): Exchange;
}

export function stageWorld(
  options: {
    route?: RouteInit;
    nodes?: string[];
    /** Upstream fields on top of "u" (retryAfterScope, say). */
    upstream?: Record<string, unknown>;
    breaker?: Record<string, number>;
    healing?: Omit<RequestHealingOptions, "registry" | "logger" | "clock">;
  } = {},
): StageWorld {
  const clock = new FakeClock(1_000_000);
  const registry = new Registry();
  const logger = pino({ level: "silent" });
  const nodes = options.nodes ?? ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"];
  const result = compileSnapshot(
    create(SnapshotSchema, {
      version: 1n,
      breakers: [{ name: "b", ...options.breaker }],
      upstreams: [
        {
          name: "u",
          breaker: "b",
          nodes: nodes.map((address) => ({ address, weight: 1 })),
          ...options.upstream,
        },
      ],
      routes: [
        { name: "r", match: { pathPrefix: "/" }, upstream: "u", ...options.route } as RouteInit,
      ],
    }),
  );
  if (!result.ok) throw new Error(result.reason);
  const snapshot = result.value;
  const healing = new RequestHealing({ registry, logger, clock, ...options.healing });
  healing.sync(snapshot);
  const deps: ProxyDeps = {
    metrics: new ProxyMetrics(registry),
    logger,
    pools: new PoolRegistry(),
    healing,
  };
  const route = snapshot.match("GET", "", "/", {})!;
  return {
    clock,
    registry,
    deps,
    exchange: (init = {}) =>
      new Exchange(
        init.req ??
          ({
            socket: { destroyed: false },
            url: "/",
            method: init.method ?? "GET",
          } as IncomingMessage),
        // Stages listen on the response (the request-body stage for its finish), so an emitter.
        new EventEmitter() as unknown as ServerResponse,
        route,
        route.targets[0]!,
        healing.upstream("u")!,
        init.method ?? "GET",
        "/",
        [],
        null,
        init.staleKey,
        "req-1",
        performance.now(),
      ),
  };
}

/** A controller that records what the stage above did to the attempt. */
export class FakeController implements StageController {
  aborted: Error | undefined;
  paused = false;
  abort(reason: Error): void {
    this.aborted ??= reason;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
}

/** One attempt the stage under test sent down: the test plays the upstream's part. */
export class FakeAttempt {
  readonly controller = new FakeController();

  constructor(
    readonly exchange: Exchange,
    readonly handler: StageHandler,
  ) {}

  start(): this {
    this.handler.onRequestStart(this.controller);
    return this;
  }

  respond(status: number, headers: IncomingHttpHeaders = {}, body?: string): void {
    this.handler.onResponseStart(this.controller, status, headers);
    if (body !== undefined) this.handler.onResponseData(this.controller, Buffer.from(body));
    this.handler.onResponseEnd(this.controller);
  }

  fail(kind: FailureKind): void {
    this.handler.onFailure({ kind });
  }
}

/** The fake dispatcher under a stage: records every attempt instead of sending it. */
export function fakeDispatch(): Dispatch & { attempts: FakeAttempt[] } {
  const attempts: FakeAttempt[] = [];
  const dispatch = (exchange: Exchange, handler: StageHandler) => {
    exchange.attempt += 1;
    attempts.push(new FakeAttempt(exchange, handler));
  };
  return Object.assign(dispatch, { attempts });
}

/**
 * The handler above a stage: records what reached it, in order. Given the exchange, it also
 * answers the way the client responder does (response started, status, settled).
 */
export class RecordingHandler implements StageHandler {
  readonly events: string[] = [];
  readonly failures: Failure[] = [];
  controller: StageController | undefined;

  constructor(private readonly exchange?: Exchange) {}

  onRequestStart(controller: StageController): void {
    this.controller = controller;
  }
  onResponseStart(_c: StageController, status: number): void {
    this.events.push(`start ${status}`);
    if (this.exchange !== undefined) {
      this.exchange.responseStarted = true;
      this.exchange.status = status;
      this.exchange.sentHeaders = ["content-type", "text/plain"];
    }
  }
  onResponseData(_c: StageController, chunk: Buffer): void {
    this.events.push(`data ${chunk.toString()}`);
  }
  onResponseEnd(): void {
    this.events.push("end");
    this.#settle(this.exchange?.status ?? 0);
  }
  onFailure(failure: Failure): void {
    this.failures.push(failure);
    this.events.push(`failure ${failure.kind}`);
    this.#settle(failure.kind === "client_gone" ? 499 : 502);
  }
  onStale(entry: StaleEntry): void {
    this.events.push(`stale ${entry.status} ${entry.body.toString()}`);
    this.#settle(entry.status);
  }
  #settle(status: number): void {
    if (this.exchange === undefined || this.exchange.settled) return;
    this.exchange.settled = true;
    this.exchange.status = status;
  }
}
