import type { IncomingHttpHeaders } from "node:http";
import type { CompiledRoute } from "./compiled-types.js";

/**
 * The routes of one host tier that share one path (one exact path, or one prefix), in the
 * order a match tries them: a route that constrains methods first, then more header
 * conditions before fewer, then priority (higher first), then name.
 *
 * Most paths have one route and no conditions, so the winner is known when the table is built:
 * `pick` then returns it without reading the list or the route. At 10,000 routes those are
 * cache misses a match would otherwise pay on every request (a list, its elements, the route).
 */
export class RouteCandidates {
  /** In precedence order; frozen. */
  readonly routes: readonly CompiledRoute[];
  /** The first route when it has no method or header condition: it wins every request. */
  readonly #always: CompiledRoute | undefined;

  private constructor(routes: readonly CompiledRoute[]) {
    this.routes = routes;
    const first = routes[0];
    this.#always =
      first !== undefined && first.methods === undefined && first.headers.length === 0
        ? first
        : undefined;
    Object.freeze(this);
  }

  /** The candidates of `routes` (any order; the array is not changed); undefined when empty. */
  static of(routes: readonly CompiledRoute[]): RouteCandidates | undefined {
    if (routes.length === 0) return undefined;
    return new RouteCandidates(Object.freeze([...routes].sort(byPrecedence)));
  }

  /** The first route whose method and header conditions the request meets. */
  pick(method: string, headers: IncomingHttpHeaders): CompiledRoute | undefined {
    if (this.#always !== undefined) return this.#always;
    for (const route of this.routes) {
      if (route.methods !== undefined && !route.methods.has(method)) continue;
      if (route.headers.length > 0 && !headersSatisfied(route, headers)) continue;
      return route;
    }
    return undefined;
  }
}

function headersSatisfied(route: CompiledRoute, headers: IncomingHttpHeaders): boolean {
  for (const condition of route.headers) {
    // node:http builds request headers on a plain object: a condition named "constructor" or
    // "toString" would read Object.prototype, so only the request's own headers count.
    // (A "__proto__" header never reaches req.headers, so such a condition never matches.)
    if (!Object.hasOwn(headers, condition.name)) return false;
    const actual = headers[condition.name];
    if (actual === undefined) return false;
    if (typeof actual === "string") {
      if (actual !== condition.value) return false;
    } else if (!actual.includes(condition.value)) {
      return false;
    }
  }
  return true;
}

function byPrecedence(a: CompiledRoute, b: CompiledRoute): number {
  const methods = Number(b.methods !== undefined) - Number(a.methods !== undefined);
  if (methods !== 0) return methods;
  const headers = b.headers.length - a.headers.length;
  if (headers !== 0) return headers;
  const priority = b.priority - a.priority;
  if (priority !== 0) return priority;
  return compare(a.name, b.name);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
