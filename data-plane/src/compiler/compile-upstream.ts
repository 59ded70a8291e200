import type { BreakerPolicy, Upstream } from "@clawgate/proto";
import { SmoothWrrPicker } from "../balancer/smooth-wrr.js";
import type { CompiledNode, CompiledUpstream } from "./compiled-types.js";
import { parseNodeAddress } from "./node-address.js";
import { requestPathProblem } from "./origin-form.js";

export type Compiled<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Names of resources, as the control plane enforces them; also bounds metric label values. */
export const RESOURCE_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const MAX_WEIGHT = 1000;
/**
 * Idle keep-alive time of upstream connections when the snapshot does not say (a control plane
 * older than the field); the control plane's default too. undici's own default, and below the
 * 5 s keepAliveTimeout of Node.js servers, so the proxy never picks a socket the node is closing.
 */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 4_000;
/** Ten minutes: undici's own cap on a keep-alive time a server may ask for. */
export const MAX_KEEP_ALIVE_TIMEOUT_MS = 600_000;
/** A control character: CR, LF, NUL and the rest of C0, DEL and C1. */
const CONTROL = /\p{Cc}/u;

export function compileUpstream(
  upstream: Upstream,
  index: number,
  breakers: ReadonlyMap<string, BreakerPolicy>,
): Compiled<CompiledUpstream> {
  const name = upstream.name;
  if (name === "") return fail(`upstreams[${index}]: name is empty`);
  if (!RESOURCE_NAME.test(name)) return fail(`upstream "${name}": name is not a valid name`);
  const where = `upstream "${name}"`;
  if (upstream.breaker !== "" && !breakers.has(upstream.breaker)) {
    return fail(`${where}: breaker "${upstream.breaker}" is not in the snapshot`);
  }
  // The prober writes this path into a request line; one it cannot send would fail every probe
  // and evict every healthy node, so the snapshot is refused instead.
  const healthPath = upstream.healthCheck?.path ?? "";
  const pathProblem =
    healthPath === "" ? undefined : requestPathProblem(healthPath, { query: true });
  if (pathProblem !== undefined) return fail(`${where}: healthCheck.path ${pathProblem}`);
  if (CONTROL.test(upstream.healthCheck?.expectStatus ?? "")) {
    return fail(`${where}: healthCheck.expectStatus holds a control character`);
  }
  const nodes: CompiledNode[] = [];
  const seen = new Set<string>();
  for (const [i, node] of upstream.nodes.entries()) {
    const field = `${where}: nodes[${i}]`;
    const parsed = parseNodeAddress(node.address);
    if (!parsed.ok) return fail(`${field}.address ${parsed.reason}`);
    if (seen.has(node.address)) return fail(`${field}.address repeats "${node.address}"`);
    seen.add(node.address);
    if (!Number.isInteger(node.weight) || node.weight < 1 || node.weight > MAX_WEIGHT) {
      return fail(`${field}.weight must be 1..${MAX_WEIGHT}, got ${node.weight}`);
    }
    const hostForUrl = parsed.host.includes(":") ? `[${parsed.host}]` : parsed.host;
    nodes.push(
      Object.freeze({
        address: node.address,
        host: parsed.host,
        port: parsed.port,
        weight: node.weight,
        source: node.source,
        upstream: name,
        origin: `http://${hostForUrl}:${parsed.port}`,
      }),
    );
  }
  const keepAliveTimeoutMs = upstream.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
  if (
    !Number.isInteger(keepAliveTimeoutMs) ||
    keepAliveTimeoutMs < 1 ||
    keepAliveTimeoutMs > MAX_KEEP_ALIVE_TIMEOUT_MS
  ) {
    return fail(
      `${where}: keepAliveTimeoutMs must be 1..${MAX_KEEP_ALIVE_TIMEOUT_MS}, got ${keepAliveTimeoutMs}`,
    );
  }
  const frozenNodes = Object.freeze(nodes);
  return {
    ok: true,
    value: Object.freeze({
      name,
      nodes: frozenNodes,
      picker: new SmoothWrrPicker(frozenNodes),
      breaker: upstream.breaker,
      breakerPolicy: upstream.breaker === "" ? undefined : breakers.get(upstream.breaker),
      maxConnectionsPerNode: upstream.maxConnectionsPerNode,
      keepAliveTimeoutMs,
      source: upstream,
    }),
  };
}

export function fail(reason: string): { ok: false; reason: string } {
  return { ok: false, reason };
}
