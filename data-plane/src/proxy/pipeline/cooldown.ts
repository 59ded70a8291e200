import type { IncomingHttpHeaders } from "node:http";
import { parseRetryAfter } from "../../breaker/retry-after-gate.js";
import type { Clock } from "../../clock/clock.js";
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
 * The upstream's Retry-After cooldown, binding (seed 004): nothing goes to the upstream before
 * the time it named. The gate fails a request fast while it runs; it stands before the breaker,
 * so a blocked request does not take the half-open probe slot.
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
  const gate = exchange.healing.cooldown.check();
  if (gate.ok) return true;
  deps.healing.breakerMetrics.retryAfterSkip(exchange.target.upstream.name);
  failFast(deps, exchange, handler, "retry_after", gate.retryAfterMs);
  return false;
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
        this.exchange.healing.cooldown.blockFor(waitMs);
        this.exchange.coolingDown = true;
      }
    }
    this.handler.onResponseStart(controller, status, headers);
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return typeof value === "string" ? value : value?.[0];
}
