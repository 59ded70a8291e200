import type { CompiledNode, CompiledUpstream } from "../compiler/compiled-types.js";
import type { ProbeTls } from "./prober/probe-protocol.js";

/** An upstream's health check with every default filled in. */
export interface HealthCheckSettings {
  /** Time between probes of one node; default 10000 (seed 000: a 10 s probe cycle). */
  readonly intervalMs: number;
  /** Deadline of one whole probe; default 3000 (seed 000: 3 s on a LAN). */
  readonly timeoutMs: number;
  /** Consecutive probe failures that evict; default 2 (seed 000: two in a row filter blips). */
  readonly unhealthyThreshold: number;
  /** Consecutive probe successes that readmit; default 2. */
  readonly healthyThreshold: number;
  /** HTTP path probed after TCP connects; default "" (TCP only, as on the wire). */
  readonly path: string;
  /** JSON `status` the body must carry; default "" (any 2xx passes). */
  readonly expectStatus: string;
}

export const DEFAULT_HEALTH_CHECK: HealthCheckSettings = Object.freeze({
  intervalMs: 10_000,
  timeoutMs: 3_000,
  unhealthyThreshold: 2,
  healthyThreshold: 2,
  path: "",
  expectStatus: "",
});

/** One node to watch, as `HealthRegistry.sync` takes it. */
export interface HealthTarget {
  readonly upstream: string;
  /** host:port as configured; the key with `upstream`. */
  readonly address: string;
  /** Host to dial, without brackets for IPv6. */
  readonly host: string;
  readonly port: number;
  /** The upstream's health check; a proto `HealthCheck` fits. Zero or missing fields take defaults. */
  readonly healthCheck?: Partial<HealthCheckSettings> | undefined;
  /** The upstream's TLS settings; probes use them too. Undefined for plaintext. */
  readonly tls?: ProbeTls | undefined;
}

/**
 * Fills defaults. A zero counts as unset, because proto3 cannot tell 0 from absent and a zero
 * interval or threshold would be meaningless (a busy loop, an instant eviction).
 */
export function healthCheckSettings(input?: Partial<HealthCheckSettings>): HealthCheckSettings {
  const d = DEFAULT_HEALTH_CHECK;
  return Object.freeze({
    intervalMs: positive(input?.intervalMs) ?? d.intervalMs,
    timeoutMs: positive(input?.timeoutMs) ?? d.timeoutMs,
    unhealthyThreshold: positive(input?.unhealthyThreshold) ?? d.unhealthyThreshold,
    healthyThreshold: positive(input?.healthyThreshold) ?? d.healthyThreshold,
    path: input?.path ?? d.path,
    expectStatus: input?.expectStatus ?? d.expectStatus,
  });
}

/** The parts of a `CompiledUpstream` the health targets are made from. */
export type HealthSource = Pick<CompiledUpstream, "name"> & {
  /** The upstream's TLS; its `probe` part is what crosses to the probe thread. */
  readonly tls?: { readonly probe: ProbeTls } | undefined;
  readonly nodes: readonly Pick<CompiledNode, "address" | "host" | "port">[];
  readonly source: { readonly healthCheck?: Partial<HealthCheckSettings> | undefined };
};

/** Every node of a compiled snapshot's upstreams: `registry.sync(healthTargets(s.upstreams.values()))`. */
export function healthTargets(upstreams: Iterable<HealthSource>): HealthTarget[] {
  const targets: HealthTarget[] = [];
  for (const upstream of upstreams) {
    const healthCheck = upstream.source.healthCheck;
    for (const node of upstream.nodes) {
      targets.push({
        upstream: upstream.name,
        address: node.address,
        host: node.host,
        port: node.port,
        healthCheck,
        tls: upstream.tls?.probe,
      });
    }
  }
  return targets;
}

function positive(value: number | undefined): number | undefined {
  return value !== undefined && value > 0 ? value : undefined;
}
