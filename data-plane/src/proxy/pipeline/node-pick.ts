import type { IncomingHttpHeaders } from "node:http";
import type { CompiledNode } from "../../compiler/compiled-types.js";
import type { RefusedReport, UpstreamHealing } from "../request-healing.js";
import type { Exchange } from "./exchange.js";
import { failFast } from "./failure-log.js";
import type { ProxyDeps } from "./proxy-deps.js";
import { DecoratorHandler, type Failure, type Interceptor, type StageController } from "./stage.js";

/** How long a client is asked to wait when no node is in rotation. */
const NO_NODE_RETRY_AFTER_MS = 1_000;

/**
 * Picks the attempt's node: the one a retry reserved, else the next of the upstream's picker,
 * which holds only the nodes in rotation (rebuilt when health changes), so a pick never looks
 * health up. A node that refuses the connection is reported at once (the passive signal that
 * quarantines it and triggers a probe), before the retry stage picks another.
 */
export function nodePick(deps: ProxyDeps): Interceptor {
  const reportRefused = deps.healing.reportRefused;
  return (next) => (exchange, handler) => {
    const node = exchange.nextNode ?? pickNode(exchange.healing);
    exchange.nextNode = undefined;
    if (node === undefined) {
      failFast(deps, exchange, handler, "no_healthy_node", NO_NODE_RETRY_AFTER_MS);
      return;
    }
    exchange.node = node;
    next(exchange, new PassiveHealthHandler(handler, node, reportRefused));
  };
}

/**
 * The next node in rotation, past those cooling down after their own Retry-After; also used by
 * the WebSocket handshake.
 */
export function pickNode(healing: UpstreamHealing): CompiledNode | undefined {
  const cooldowns = healing.nodeCooldowns;
  if (!cooldowns.active()) return healing.picker.pick();
  return healing.picker.pick((node) => !cooldowns.check(node.address).ok);
}

/**
 * Another node for a retry: in rotation and not tried by this request yet; undefined when none
 * is left.
 */
export function pickAnother(exchange: Exchange): CompiledNode | undefined {
  exchange.tried ??= [];
  const tried = exchange.tried;
  if (exchange.node !== undefined) tried.push(exchange.node);
  const cooldowns = exchange.healing.nodeCooldowns;
  if (!cooldowns.active()) return exchange.healing.picker.pick((node) => tried.includes(node));
  return exchange.healing.picker.pick(
    (node) => tried.includes(node) || !cooldowns.check(node.address).ok,
  );
}

class PassiveHealthHandler extends DecoratorHandler {
  constructor(
    handler: PassiveHealthHandler["handler"],
    private readonly node: CompiledNode,
    private readonly reportRefused: RefusedReport,
  ) {
    super(handler);
  }

  override onFailure(failure: Failure): void {
    if (failure.kind === "refused") this.reportRefused(this.node.upstream, this.node.address);
    this.handler.onFailure(failure);
  }

  // Pass-throughs of its own: see DecoratorHandler on why (monomorphic calls per request).
  override onRequestStart(controller: StageController): void {
    this.handler.onRequestStart(controller);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.handler.onResponseStart(controller, status, headers);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    this.handler.onResponseEnd(controller);
  }
}
