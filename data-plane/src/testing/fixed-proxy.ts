import { create, SnapshotSchema } from "@clawgate/proto";
import pino from "pino";
import { Registry } from "prom-client";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { createProxyHandler, type ProxyHandlerOptions } from "../proxy/proxy-handler.js";
import type { PoolRegistry } from "../upstream/pool-registry.js";

/** A snapshot as a test writes it (version 1 unless given). */
export type SnapshotInit = NonNullable<Parameters<typeof create<typeof SnapshotSchema>>[1]>;

/** Compiles a snapshot as the data plane would apply it; throws the compiler's reason on a NACK. */
export function compiledFrom(init: SnapshotInit): CompiledSnapshot {
  const result = compileSnapshot(create(SnapshotSchema, { version: 1n, ...init }));
  if (!result.ok) throw new Error(result.reason);
  return result.value;
}

/**
 * The proxy's request listener over one snapshot that never changes, with a silent logger and
 * metrics in `options.metrics` or a registry of its own; the rest of ProxyHandlerOptions as
 * given (an access log, a replay limit).
 */
export function fixedProxyHandler(
  init: SnapshotInit,
  pools: PoolRegistry,
  options: Partial<Omit<ProxyHandlerOptions, "current" | "pools">> = {},
): ReturnType<typeof createProxyHandler> {
  const compiled = compiledFrom(init);
  return createProxyHandler({
    current: () => compiled,
    pools,
    metrics: new ProxyMetrics(new Registry()),
    logger: pino({ level: "silent" }),
    ...options,
  });
}

/** Route "chat" (/v1) with usage.injectStreamUsage, to one upstream "model" at `address`. */
export function usageRouteSnapshot(address: string): SnapshotInit {
  return {
    upstreams: [{ name: "model", nodes: [{ address, weight: 1 }] }],
    routes: [
      {
        name: "chat",
        match: { pathPrefix: "/v1" },
        upstream: "model",
        usage: { injectStreamUsage: true },
      },
    ],
  };
}
