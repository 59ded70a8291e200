/**
 * Every default of the config model, in one place. The control plane fills them into each
 * document before it is stored and published, so a snapshot carries complete resources; the
 * data plane reads one only where the wire field is optional for an older control plane.
 */

/** The breaker policy upstreams name unless they say otherwise; built in when not stored. */
export const DEFAULT_BREAKER_NAME = "default";

/** Share of traffic of a node relative to the others. */
export const DEFAULT_NODE_WEIGHT = 1;
export const MAX_NODE_WEIGHT = 1000;

/** An upstream's active health check (seed 000). */
export const DEFAULT_HEALTH_CHECK = Object.freeze({
  /** Time between probes of one node: a 10 s probe cycle. */
  intervalMs: 10_000,
  /** A probe that takes longer fails: 3 s on a LAN. */
  timeoutMs: 3_000,
  /** Consecutive failures that evict a node: two, so one lost probe never does. */
  unhealthyThreshold: 2,
  /** Consecutive successes that readmit a node. */
  healthyThreshold: 2,
  /** Probed after TCP connects; the one default both planes use. "" (wire) / null: TCP only. */
  path: "/healthz",
});

/** Most connections a data plane opens to each node. */
export const DEFAULT_MAX_CONNECTIONS_PER_NODE = 128;

/**
 * Idle keep-alive time of upstream connections: undici's own default, and below the 5 s
 * keepAliveTimeout of Node.js servers, so the proxy never picks a socket the node is closing.
 */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 4_000;
/** Ten minutes: undici's own cap on a keep-alive time a server may ask for. */
export const MAX_KEEP_ALIVE_TIMEOUT_MS = 600_000;

/** Retries after the first attempt, each on another node. */
export const DEFAULT_RETRY_ATTEMPTS = 2;
/**
 * Conditions that allow a retry. Connect failures never reached the upstream, so any method may
 * go again. A reset (a node killed or restarted mid-request) is retried like nginx's
 * `proxy_next_upstream error`: the data plane still lets only idempotent methods go again once
 * the request reached the node, so a POST that may have been acted on is never sent twice.
 */
export const DEFAULT_RETRY_ON: readonly ("connect-failure" | "reset")[] = Object.freeze([
  "connect-failure",
  "reset",
]);

/** A route's timeouts. */
export const DEFAULT_ROUTE_TIMEOUTS = Object.freeze({
  connectMs: 1_000,
  headersMs: 15_000,
  bodyMs: 30_000,
  totalMs: 60_000,
  /** A streaming response (SSE, chunked) with no byte for this long is cut; 0 is off. */
  streamIdleMs: 300_000,
});

/** Serve a stale GET response this long while the upstream fails; 0 is off. */
export const DEFAULT_STALE_IF_ERROR_SECONDS = 0;

/** The breaker policy (seed 004). */
export const DEFAULT_BREAKER_POLICY = Object.freeze({
  /** Sliding window failures are counted over: 30 s. */
  windowMs: 30_000,
  /** Requests the window must hold before the failure ratio counts. */
  minRequests: 20,
  /** Failure share in the window that opens the breaker. */
  failureRatio: 0.6,
  /** Consecutive transport failures that open it at any volume. */
  consecutiveFailures: 5,
  /** First open period: 30 s. */
  cooldownMs: 30_000,
  /** Each failed half-open probe multiplies the cooldown by this. */
  cooldownMultiplier: 2,
  /** Cap on the grown cooldown: 300 s. */
  maxCooldownMs: 300_000,
  /** Probe requests allowed at once while half-open. */
  halfOpenMaxInFlight: 1,
  /** Consecutive probe successes that close it. */
  halfOpenSuccesses: 2,
  /** Half-open probes per data plane, not coordinated across the fleet. */
  fleetProbe: false,
});
