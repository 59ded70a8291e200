import {
  type BreakerPolicy,
  DEFAULT_HEALTH_CHECK,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_RETRY_AFTER_SCOPE,
  parseNodeAddress,
  type RetryAfterScope,
  type Upstream,
} from "@clawgate/proto";
import { SmoothWrrPicker } from "../balancer/smooth-wrr.js";
import { loadUpstreamTls } from "../upstream/upstream-tls.js";
import type { CompiledNode, CompiledUpstream } from "./compiled-types.js";

/**
 * Compiles one upstream of a snapshot that validateSnapshot passed: nothing here refuses.
 * Fields an older control plane may leave out take the shared defaults, never a literal here.
 * The one exception: a TLS file that cannot be read on this machine throws UpstreamFileError,
 * which compileSnapshot turns into a NACK naming the field and path.
 */
export function compileUpstream(
  upstream: Upstream,
  breakers: ReadonlyMap<string, BreakerPolicy>,
): CompiledUpstream {
  const name = upstream.name;
  const tls = loadUpstreamTls(upstream);
  // One constant per scheme: built per node, "http://" was a new 7-character string each time.
  const scheme = tls === undefined ? "http://" : "https://";
  const nodes: CompiledNode[] = [];
  for (const node of upstream.nodes) {
    const parsed = parseNodeAddress(node.address);
    if (!parsed.ok) throw new Error(`unvalidated node address in upstream ${name}`);
    const hostForUrl = parsed.host.includes(":") ? `[${parsed.host}]` : parsed.host;
    const hostPort = `${hostForUrl}:${parsed.port}`;
    nodes.push(
      Object.freeze({
        address: node.address,
        host: parsed.host,
        port: parsed.port,
        weight: node.weight,
        source: node.source,
        upstream: name,
        // The address as configured where it already is host:port in URL form (nearly always):
        // one concatenated string that shares it, not a chain of three kept for every node.
        origin: scheme + (hostPort === node.address ? node.address : hostPort),
      }),
    );
  }
  const frozenNodes = Object.freeze(nodes);
  // A snapshot without a health check (hand-built, or a control plane before the field) is
  // probed with the shared default, so both planes agree on what "no setting" means.
  const source =
    upstream.healthCheck === undefined
      ? { ...upstream, healthCheck: { ...DEFAULT_HEALTH_CHECK, expectStatus: "" } }
      : upstream;
  return Object.freeze({
    name,
    nodes: frozenNodes,
    picker: new SmoothWrrPicker(frozenNodes),
    breaker: upstream.breaker,
    breakerPolicy: upstream.breaker === "" ? undefined : breakers.get(upstream.breaker),
    maxConnectionsPerNode: upstream.maxConnectionsPerNode,
    keepAliveTimeoutMs: upstream.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
    tls,
    // Host sent upstream when hostRewrite is on: the TLS server name, else (undefined) the
    // pool's own origin, which undici writes as each node's host[:port].
    hostRewrite: upstream.hostRewrite || tls?.servername !== undefined,
    // "" is a control plane older than the field.
    retryAfterScope: (upstream.retryAfterScope || DEFAULT_RETRY_AFTER_SCOPE) as RetryAfterScope,
    hostName: tls?.servername,
    // Only over TLS: the control plane refuses it otherwise, and h2 is chosen by ALPN.
    http2: upstream.http2 && tls !== undefined,
    source: source as Upstream,
  });
}
