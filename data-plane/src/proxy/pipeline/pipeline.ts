import { attemptLog } from "./attempt-log.js";
import { breakerGate, breakerPermit } from "./breaker.js";
import { ClientResponse } from "./client-response.js";
import { cooldownGate, cooldownPerAttempt } from "./cooldown.js";
import type { Exchange } from "./exchange.js";
import { nodePick } from "./node-pick.js";
import { policyChain } from "./policy-chain.js";
import type { ProxyDeps } from "./proxy-deps.js";
import { requestBody } from "./request-body.js";
import { requestMetrics } from "./request-metrics.js";
import { retry } from "./retry.js";
import { sendToNode } from "./send-to-node.js";
import { compose } from "./stage.js";
import { staleIfError } from "./stale-if-error.js";
import { streamUsageRequest, streamUsageResponse } from "./stream-usage.js";
import { totalTimeout } from "./total-timeout.js";

/**
 * The request layer of self-healing, in the order a request passes through it. Stages above
 * `retry` run once per request and see how it ended; those under it run once per attempt.
 */
export function buildPipeline(deps: ProxyDeps): (exchange: Exchange) => void {
  const dispatch = compose(
    [
      requestMetrics(deps.metrics), // counts the answered request, whatever answered it
      // A usage chunk the gateway asked for and the client did not is kept from the client,
      // after the token budget (in the policy chain, below) read it.
      streamUsageResponse(),
      // The route's policies: ip, CORS, auth, body limit, fleet-wide budgets, headers.
      policyChain({
        clock: deps.healing.clock,
        quota: deps.quota,
        tenantMetrics: deps.tenantMetrics,
      }),
      staleIfError(deps.healing.staleCache), // a fresh-enough copy instead of an error
      // a body a retry may resend, or a small JSON one to ask for usage in, is read whole first
      requestBody(deps.replayBodyLimitBytes),
      streamUsageRequest(), // a streaming JSON request asks for its usage
      cooldownGate(deps), // the upstream's Retry-After still runs: 503 at once
      breakerPermit(deps), // one permit per request; records how the request ended
      // routes' timeouts.totalMs across attempts and backoffs; a stream outlives it, but not
      // streamIdleMs of silence
      totalTimeout(deps),
      retry(deps), // another node after a backoff, when safe and budgeted
      // ---- per attempt ----
      cooldownPerAttempt(deps), // a retry passes the gate again; 429/503 Retry-After learned
      breakerGate(deps), // a retry fails fast when the breaker opened meanwhile
      nodePick(deps), // the next node in rotation; refused nodes reported
      attemptLog(deps), // each failed attempt logged and counted
    ],
    sendToNode(deps), // the node's connection pool
  );
  // The responder writes the request's access-log line (if the log is on) as it settles.
  return (exchange) =>
    dispatch(exchange, new ClientResponse(exchange, deps.logger, deps.accessLog));
}
