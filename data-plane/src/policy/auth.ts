import type { IncomingHttpHeaders } from "node:http";
import { removeHeaders } from "./flat-headers.js";
import type { Policy, PolicyAnswer, PolicyFactory, PolicyRequest } from "./policy.js";

const UNAUTHORIZED: PolicyAnswer = Object.freeze({ kind: "error", code: "CLAWGATE_UNAUTHORIZED" });
const FORBIDDEN: PolicyAnswer = Object.freeze({ kind: "error", code: "CLAWGATE_FORBIDDEN" });

/** The header the upstream learns the tenant from; a client's own copy never gets through. */
export const TENANT_HEADER = "x-clawgate-tenant";

/**
 * route.auth: the caller's API key, from x-api-key or else Authorization: Bearer, names the
 * tenant. The key never goes upstream (the header that carried it is removed); the tenant's
 * name does, as x-clawgate-tenant. "required": no key is 401; "optional": a request without
 * key goes on as nobody's, but a key that is sent must be valid. A tenant with allowedRoutes
 * that do not name the route gets 403.
 */
export const auth: PolicyFactory = {
  name: "auth",
  compile({ route }): Policy | undefined {
    if (route.auth === undefined) return undefined;
    const required = route.auth.tenants !== "optional";
    const routeName = route.name;
    return {
      name: "auth",
      onRequest(request: PolicyRequest): PolicyAnswer | undefined {
        const found = keyOf(request.req.headers);
        if (found === undefined) return required ? UNAUTHORIZED : undefined;
        // x-api-key always goes; Authorization only when it carries the key (else it may be
        // meant for the upstream), whichever header the key was taken from.
        removeHeaders(request.headers, found.inBearer ? isKeyOrAuthorization : isApiKey);
        // The keys of the request's own snapshot: a tenant change swaps them without
        // recompiling this route.
        const tenant = request.tenantKeys.find(found.key);
        if (tenant === undefined) return UNAUTHORIZED;
        const allowed = tenant.source.allowedRoutes;
        if (allowed.length > 0 && !allowed.includes(routeName)) return FORBIDDEN;
        request.tenant = tenant;
        request.headers.push(TENANT_HEADER, tenant.name);
        return undefined;
      },
    };
  },
};

const BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i;

/** The key (x-api-key, else the bearer), and whether Authorization carries it as a bearer. */
function keyOf(headers: IncomingHttpHeaders): { key: string; inBearer: boolean } | undefined {
  const authorization = headers.authorization;
  const apiKey = headers["x-api-key"];
  if (typeof apiKey === "string" && apiKey !== "") {
    // A client sending its key in both headers must not have the second copy forwarded. The
    // regex runs only when Authorization holds the key at all: usually it carries something
    // meant for the upstream, or nothing.
    const inBearer =
      authorization?.includes(apiKey) === true && BEARER.exec(authorization)?.[1] === apiKey;
    return { key: apiKey, inBearer };
  }
  const bearer = authorization === undefined ? null : BEARER.exec(authorization);
  return bearer === null ? undefined : { key: bearer[1]!, inBearer: true };
}

function isApiKey(name: string): boolean {
  return name === "x-api-key";
}

function isKeyOrAuthorization(name: string): boolean {
  return name === "x-api-key" || name === "authorization";
}
