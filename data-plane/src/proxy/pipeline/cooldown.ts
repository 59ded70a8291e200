import type { IncomingHttpHeaders } from "node:http";
import type { RetryAfterScope } from "@clawgate/proto";
import { type GateCheck, parseRetryAfter } from "../../breaker/retry-after-gate.js";
import type { Clock } from "../../clock/clock.js";
import type { UpstreamHealing } from "../request-healing.js";
import type { Exchange } from "./exchange.js";
import { failFast } from "./failure-log.js";
import type { ProxyDeps } from "./proxy-deps.js";
import {
  DecoratorHandler,
  type Dispatch,
  type Interceptor,
  type StageController,
  type StageHandler,
} from "./stage.js";

/**
 * The upstream's Retry-After cooldown, binding (seed 004): nothing goes to what it cooled down
 * before the time it named. What that is follows the upstream's retryAfterScope: the whole
 * upstream, only the tenant the 429 answered ("" stands for requests without tenant), or only
 * the node that answered (node-pick.ts skips it; the gate fails fast once every node cools).
 * The gate fails a request fast while it runs; it stands before the breaker, so a blocked
 * request does not take the half-open probe slot.
 */
export function cooldownGate(deps: ProxyDeps): Interceptor {
  return (next) => (exchange, handler) => {
    if (passesGate(deps, exchange, handler)) next(exchange, handler);
  };
}

/**
 * Per attempt: a retry passes the gate again (the cooldown may have started meanwhile), and a
 * 429 or 503 with Retry-After starts the cooldown before the retry stage above sees the
 * response, so that response is answered instead of retried.
 */
export function cooldownPerAttempt(deps: ProxyDeps): Interceptor {
  return (next: Dispatch) => (exchange, handler) => {
    if (exchange.attempt > 0 && !passesGate(deps, exchange, handler)) return;
    exchange.coolingDown = false;
    next(exchange, new RetryAfterHandler(handler, exchange, deps.healing.clock));
  };
}

function passesGate(deps: ProxyDeps, exchange: Exchange, handler: StageHandler): boolean {
  const gate = gateCheck(exchange);
  if (gate.ok) return true;
  deps.healing.breakerMetrics.retryAfterSkip(exchange.target.upstream.name);
  failFast(deps, exchange, handler, "retry_after", gate.retryAfterMs);
  return false;
}

function gateCheck(exchange: Exchange): GateCheck {
  return scopedCooldownCheck(
    exchange.healing,
    exchange.target.upstream.retryAfterScope,
    exchange.tenant?.name,
  );
}

/**
 * Whether a request may go to the upstream now, by the cooldowns of its retryAfterScope; also
 * asked by the WebSocket handshake.
 */
export function scopedCooldownCheck(
  healing: UpstreamHealing,
  scope: RetryAfterScope,
  tenant: string | undefined,
): GateCheck {
  switch (scope) {
    case "tenant":
      return healing.tenantCooldowns.check(tenant ?? "");
    case "node":
      return healing.nodeCooldowns.active() ? allNodesCooling(healing) : healing.cooldown.check();
    default:
      return healing.cooldown.check();
  }
}

/** Fails only when every node in rotation cools down: then the soonest one is waited for. */
function allNodesCooling(healing: UpstreamHealing): GateCheck {
  const cooldowns = healing.nodeCooldowns;
  let soonest = Number.POSITIVE_INFINITY;
  for (const node of healing.picker.items) {
    const check = cooldowns.check(node.address);
    if (check.ok) return check;
    if (check.retryAfterMs < soonest) soonest = check.retryAfterMs;
  }
  return soonest === Number.POSITIVE_INFINITY ? { ok: true } : { ok: false, retryAfterMs: soonest };
}

class RetryAfterHandler extends DecoratorHandler {
  constructor(
    handler: RetryAfterHandler["handler"],
    private readonly exchange: Exchange,
    private readonly clock: Clock,
  ) {
    super(handler);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (status === 429 || status === 503) {
      // An HTTP-date is read against the healing clock, the one the cooldown counts down on.
      const waitMs = parseRetryAfter(first(headers["retry-after"]), this.clock.now());
      if (waitMs !== undefined && waitMs > 0) {
        blockFor(this.exchange, waitMs);
        this.exchange.coolingDown = true;
      }
    }
    this.handler.onResponseStart(controller, status, headers);
  }

  // Pass-throughs of its own: see DecoratorHandler on why (monomorphic calls per request).
  override onRequestStart(controller: StageController): void {
    this.handler.onRequestStart(controller);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    this.handler.onResponseEnd(controller);
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return typeof value === "string" ? value : value?.[0];
}

/** Starts the cooldown of what the upstream's retryAfterScope says the answer was about. */
function blockFor(exchange: Exchange, waitMs: number): void {
  const healing = exchange.healing;
  switch (exchange.target.upstream.retryAfterScope) {
    case "tenant":
      healing.tenantCooldowns.blockFor(exchange.tenant?.name ?? "", waitMs);
      return;
    case "node":
      if (exchange.node !== undefined) {
        healing.nodeCooldowns.blockFor(exchange.node.address, waitMs);
        return;
      }
      break;
  }
  healing.cooldown.blockFor(waitMs);
}
