import type { IncomingHttpHeaders } from "node:http";
import type { StaleEntry } from "../../fallback/stale-cache.js";
import type {
  PolicyAnswer,
  PolicyChain,
  PolicyServices,
  ResponseObserver,
} from "../../policy/policy.js";
import { runRequestPolicies } from "../../policy/run-policies.js";
import type { Exchange } from "./exchange.js";
import {
  DecoratorHandler,
  type Failure,
  type Interceptor,
  type StageController,
  type StageHandler,
} from "./stage.js";

/** Stands in for an upstream attempt when a policy answers: there is nothing to abort. */
const ANSWERED_HERE: StageController = Object.freeze({
  abort() {},
  pause() {},
  resume() {},
});

/**
 * The route's policies (policy-list.ts order), before anything about the upstream runs: a
 * policy's answer (401, 403, 413, a preflight's 204...) ends the request here, so it never
 * takes a cooldown, breaker permit or node. Policies that follow the response see it on its
 * way up. A route without policies costs one length check.
 */
export function policyChain(services: PolicyServices): Interceptor {
  return (next) => (exchange, handler) => {
    const policies = exchange.route.policies;
    if (policies.length === 0) {
      next(exchange, handler);
      return;
    }
    const following = new PolicyHandler(handler, exchange, policies, services);
    const verdict = runRequestPolicies(policies, exchange, services);
    if (verdict === undefined) next(exchange, following);
    else if (!(verdict instanceof Promise)) answerWith(following, verdict);
    else {
      // A policy waits (a fleet share on its way, a few ms): the request goes on after it.
      verdict.then(
        (answer) =>
          answer === undefined ? next(exchange, following) : answerWith(following, answer),
        () => answerWith(following, { kind: "error", code: "CLAWGATE_INTERNAL" }),
      );
    }
  };
}

function answerWith(handler: StageHandler, answer: PolicyAnswer): void {
  if (answer.kind === "wait") throw new Error("a wait answer is settled by runRequestPolicies");
  if (answer.kind === "error") {
    handler.onFailure({ kind: "rejected", code: answer.code, retryAfterMs: answer.retryAfterMs });
    return;
  }
  handler.onResponseStart(ANSWERED_HERE, answer.status, { ...answer.headers });
  handler.onResponseEnd(ANSWERED_HERE);
}

class PolicyHandler extends DecoratorHandler {
  #observers: ResponseObserver[] | undefined;
  #completed = false;

  constructor(
    handler: StageHandler,
    private readonly exchange: Exchange,
    private readonly policies: PolicyChain,
    private readonly services: PolicyServices,
  ) {
    super(handler);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (controller !== ANSWERED_HERE) {
      for (const policy of this.policies) {
        const observer = policy.onResponse?.(this.exchange, status, headers, this.services);
        if (observer === undefined) continue;
        if (this.#observers === undefined) this.#observers = [observer];
        else this.#observers.push(observer);
      }
    }
    this.handler.onResponseStart(controller, status, headers);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    const observers = this.#observers;
    if (observers !== undefined) for (const observer of observers) observer.onData?.(chunk);
    this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    const observers = this.#observers;
    if (observers !== undefined) for (const observer of observers) observer.onEnd?.();
    this.handler.onResponseEnd(controller);
    this.#complete();
  }

  override onFailure(failure: Failure): void {
    const res = this.exchange.res;
    if (!res.headersSent && !this.exchange.settled) {
      // Set on the response before the error is written: writeHead keeps them.
      const added: IncomingHttpHeaders = {};
      for (const policy of this.policies) policy.onGatewayAnswer?.(this.exchange, added);
      for (const name in added) res.setHeader(name, added[name]!);
    }
    this.handler.onFailure(failure);
    this.#complete();
  }

  override onStale(entry: StaleEntry, ageSeconds: number): void {
    this.handler.onStale(entry, ageSeconds);
    this.#complete();
  }

  #complete(): void {
    const exchange = this.exchange;
    if (this.#completed || !exchange.settled) return;
    this.#completed = true;
    for (const policy of this.policies)
      policy.onComplete?.(exchange, exchange.status, this.services);
  }
}
