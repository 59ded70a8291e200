import type { IncomingHttpHeaders } from "node:http";
import type { ErrorCode } from "../../errors/error-catalog.js";
import type { FailureKind } from "../../errors/failure-kind.js";
import type { StaleEntry } from "../../fallback/stale-cache.js";
import type { Exchange } from "./exchange.js";

/**
 * What a stage may do to the attempt under it: undici's DispatchController, or a stand-in for
 * the time between attempts (a retry's backoff), so aborting always reaches what is running.
 */
export interface StageController {
  abort(reason: Error): void;
  pause(): void;
  resume(): void;
}

/**
 * How an attempt failed, as a tagged value: classified once where it happened (the node's pool,
 * or the stage that failed fast), never thrown up the pipeline.
 */
export interface Failure {
  readonly kind: FailureKind;
  /** The error behind it, for the log line; none when a stage decided it. */
  readonly error?: Error;
  /** Retry-After the client gets with a 503 (fail-fast kinds). */
  readonly retryAfterMs?: number | undefined;
  /** The catalog error the client gets, when not the kind's own (a policy's refusal). */
  readonly code?: ErrorCode;
}

/**
 * undici's dispatch handler callbacks, plus the two ways a request ends without an upstream
 * response: a failure (tagged, see Failure) and a stale copy served instead.
 */
export interface StageHandler {
  onRequestStart(controller: StageController): void;
  onResponseStart(controller: StageController, status: number, headers: IncomingHttpHeaders): void;
  onResponseData(controller: StageController, chunk: Buffer): void;
  onResponseEnd(controller: StageController): void;
  onFailure(failure: Failure): void;
  onStale(entry: StaleEntry, ageSeconds: number): void;
}

/** Sends the exchange's next attempt, reporting to `handler`. */
export type Dispatch = (exchange: Exchange, handler: StageHandler) => void;

/** A stage: wraps the dispatch under it (undici's Dispatcher.compose interceptors). */
export type Interceptor = (next: Dispatch) => Dispatch;

/** `terminal` wrapped in `stages`, the first one outermost: reads top to bottom. */
export function compose(stages: readonly Interceptor[], terminal: Dispatch): Dispatch {
  let dispatch = terminal;
  for (let i = stages.length - 1; i >= 0; i--) dispatch = stages[i]!(dispatch);
  return dispatch;
}

/**
 * Forwards every callback to the handler above; a stage overrides what it acts on. A call in
 * these shared methods sees every stage's class, so V8 can neither inline it nor cache one
 * target (a megamorphic call, about a dozen per request per stage level); the stages every
 * request passes through therefore override the four response-path callbacks they only pass
 * on with one-liners of their own, whose calls each see the one stage above.
 */
export class DecoratorHandler implements StageHandler {
  // Declared, not a class field: a field is defined by an initializer function run for every
  // new handler, and this base runs under every stage's class, so that define was megamorphic
  // (about 1 % of the data plane's busy time under load, for ten handlers a request); a plain
  // store in the constructor is not.
  declare protected readonly handler: StageHandler;

  constructor(handler: StageHandler) {
    this.handler = handler;
  }

  onRequestStart(controller: StageController): void {
    this.handler.onRequestStart(controller);
  }

  onResponseStart(controller: StageController, status: number, headers: IncomingHttpHeaders): void {
    this.handler.onResponseStart(controller, status, headers);
  }

  onResponseData(controller: StageController, chunk: Buffer): void {
    this.handler.onResponseData(controller, chunk);
  }

  onResponseEnd(controller: StageController): void {
    this.handler.onResponseEnd(controller);
  }

  onFailure(failure: Failure): void {
    this.handler.onFailure(failure);
  }

  onStale(entry: StaleEntry, ageSeconds: number): void {
    this.handler.onStale(entry, ageSeconds);
  }
}

/**
 * Runs `next`; a throw under this stage (a bug) fails the request through `handler` instead,
 * so this stage and every one above release what they hold (a breaker permit, a budget slot,
 * a timer) and the client gets its 500.
 */
export function guarded(next: Dispatch, exchange: Exchange, handler: StageHandler): void {
  try {
    next(exchange, handler);
  } catch (bug) {
    handler.onFailure({
      kind: "internal",
      error: bug instanceof Error ? bug : new Error(String(bug)),
    });
  }
}
