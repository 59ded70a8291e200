import type { IncomingHttpHeaders } from "node:http";
import type { HeaderTransform } from "@clawgate/proto";
import { removeHeaders } from "./flat-headers.js";
import type { Policy, PolicyAnswer, PolicyFactory, PolicyRequest } from "./policy.js";

/**
 * requestHeaders and responseHeaders: `remove` drops every value of a header, `set` replaces
 * them with one value. Names are lower case (validated), as node and undici give them.
 */
export const headerTransform: PolicyFactory = {
  name: "header-transform",
  compile({ route }): Policy | undefined {
    const request = compiled(route.requestHeaders);
    const response = compiled(route.responseHeaders);
    if (request === undefined && response === undefined) return undefined;
    const policy: Policy = {
      name: "header-transform",
      onRequest(exchange: PolicyRequest): PolicyAnswer | undefined {
        if (request !== undefined) {
          removeHeaders(exchange.headers, request.drops);
          exchange.headers.push(...request.flatSet);
        }
        return undefined;
      },
    };
    if (response === undefined) return policy;
    return {
      ...policy,
      onResponse(_exchange: PolicyRequest, _status: number, headers: IncomingHttpHeaders) {
        for (const name of response.names) delete headers[name];
        for (let i = 0; i < response.flatSet.length; i += 2) {
          headers[response.flatSet[i]!] = response.flatSet[i + 1]!;
        }
        return undefined;
      },
    };
  },
};

interface CompiledTransform {
  /** Names removed or replaced. */
  readonly names: ReadonlySet<string>;
  readonly drops: (name: string) => boolean;
  /** The set pairs, flat. */
  readonly flatSet: readonly string[];
}

function compiled(transform: HeaderTransform | undefined): CompiledTransform | undefined {
  if (transform === undefined) return undefined;
  const set = Object.entries(transform.set);
  if (set.length === 0 && transform.remove.length === 0) return undefined;
  const names = new Set([...transform.remove, ...set.map(([name]) => name)]);
  return Object.freeze({
    names,
    drops: (name: string) => names.has(name),
    flatSet: Object.freeze(set.flat()),
  });
}
