import { z } from "zod";
import {
  DEFAULT_BREAKER_NAME,
  DEFAULT_HEALTH_CHECK,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_MAX_CONNECTIONS_PER_NODE,
  DEFAULT_NODE_WEIGHT,
  MAX_KEEP_ALIVE_TIMEOUT_MS,
  MAX_NODE_WEIGHT,
} from "./defaults.js";
import { lineText, ms, nodeAddress, requestPath, resourceName } from "./field-rules.js";
import { DEFAULT_RETRY_AFTER_SCOPE, RETRY_AFTER_SCOPES } from "./route-policy-rules.js";
import { upstreamTlsSchema } from "./upstream-tls.js";

// A URL parser silently drops tabs and line breaks (zod's too, before any refinement), so the
// URL called would not be the one written; whitespace and controls are refused first instead.
const webhookUrl = z
  .string()
  .refine((value) => !/[\s\p{Cc}]/u.test(value), "must hold no spaces or control characters")
  .pipe(z.url({ protocol: /^https?$/ }));

export const nodeSchema = z.strictObject({
  /** host:port of the backend instance. */
  address: nodeAddress,
  /** Share of traffic relative to the other nodes; default 1. */
  weight: z.int().min(1).max(MAX_NODE_WEIGHT).default(DEFAULT_NODE_WEIGHT),
});

const check = DEFAULT_HEALTH_CHECK;

export const healthCheckSchema = z.strictObject({
  /** Time between probes of one node; default 10 s (seed 000). */
  intervalMs: ms(100, 3_600_000, check.intervalMs),
  /** A probe that takes longer fails; default 3 s. */
  timeoutMs: ms(10, 60_000, check.timeoutMs),
  /** Consecutive failures that evict a node; default 2, so one lost probe never does. */
  unhealthyThreshold: z.int().min(1).max(100).default(check.unhealthyThreshold),
  /** Consecutive successes that readmit a node; default 2. */
  healthyThreshold: z.int().min(1).max(100).default(check.healthyThreshold),
  /**
   * HTTP path (and query) probed after TCP connects, origin-form as it goes on the request
   * line; null probes TCP only. Default /healthz.
   */
  path: requestPath({ query: true }, '"/healthz" or "/status?deep=1"')
    .nullable()
    .default(check.path)
    .describe("Origin-form path and optional query, percent-encoded; null probes TCP only"),
  /** When set, the probe's JSON body must have this `status`. */
  expectStatus: lineText(256).optional(),
});

export const upstreamSchema = z
  .strictObject({
    /** Nodes from the document; nodes from the registry are merged in at snapshot time. */
    nodes: z.array(nodeSchema).max(1000).default([]),
    healthCheck: healthCheckSchema.prefault({}),
    /** Breaker policy guarding the upstream; "default" is built in. */
    breaker: resourceName.default(DEFAULT_BREAKER_NAME),
    /** Most connections a data plane opens to each node; default 128. */
    maxConnectionsPerNode: z.int().min(1).max(10_000).default(DEFAULT_MAX_CONNECTIONS_PER_NODE),
    /**
     * An idle keep-alive connection to a node closes after this long (sooner when the node's
     * Keep-Alive header asks for less); default 4 s, undici's, below the 5 s idle timeout of
     * Node.js servers so the proxy never reuses a socket the node is closing.
     */
    keepAliveTimeoutMs: ms(1, MAX_KEEP_ALIVE_TIMEOUT_MS, DEFAULT_KEEP_ALIVE_TIMEOUT_MS),
    /** HTTPS to the nodes; absent means plaintext HTTP. */
    tls: upstreamTlsSchema.optional(),
    /**
     * Send the upstream's own name as Host instead of the client's: `tls.serverName` when set,
     * else each node's host[:port]. A route's `rewrite.host` still wins. Default false.
     */
    hostRewrite: z.boolean().default(false),
    /**
     * What a 429/503 Retry-After from a node cools down: "node" (that node, the default),
     * "upstream" (all its nodes) or "tenant" (only the calling tenant's requests to it).
     */
    retryAfterScope: z.enum(RETRY_AFTER_SCOPES).default(DEFAULT_RETRY_AFTER_SCOPE),
    /**
     * Offer HTTP/2 to the nodes (ALPN h2, falling back to HTTP/1.1 when a node does not pick
     * it). Negotiated in the TLS handshake, so it needs `tls`. Default false.
     */
    http2: z.boolean().default(false),
    remediation: z
      .strictObject({
        /** argv template: {host}, {port} and {node} are filled in per argument, no shell. */
        command: z.array(z.string().min(1)).min(1).optional(),
        /** POSTed `{ upstream, node, host, port, evidence }` as JSON; a 2xx answer is success. */
        webhookUrl: webhookUrl.optional(),
        /** A command or webhook still running after this fails as a timeout; default 30 s. */
        timeoutMs: ms(100, 600_000, 30_000),
        /** Attempts per eviction (until the majority readmits the node); default 3. */
        maxAttempts: z.int().min(1).max(100).default(3),
        /** Wait after the first attempt; doubles after each one; default 5 s. */
        backoffMs: ms(100, 3_600_000, 5_000),
        /** Cap on the doubled wait; default 5 min. */
        maxBackoffMs: ms(100, 3_600_000, 300_000),
      })
      .optional(),
  })
  .superRefine((upstream, ctx) => {
    const seen = new Set<string>();
    upstream.nodes.forEach((node, index) => {
      if (seen.has(node.address)) {
        ctx.addIssue({
          code: "custom",
          path: ["nodes", index, "address"],
          message: `duplicate node address ${node.address}`,
        });
      }
      seen.add(node.address);
    });
    // undici offers h2 only in ALPN; over plaintext the flag would silently do nothing.
    if (upstream.http2 && upstream.tls?.enabled !== true) {
      ctx.addIssue({
        code: "custom",
        path: ["http2"],
        message: "needs tls: HTTP/2 to the nodes is negotiated in the TLS handshake (ALPN)",
      });
    }
  });

/** An upstream document with every default filled in, as stored and published. */
export type UpstreamDocument = z.infer<typeof upstreamSchema>;
