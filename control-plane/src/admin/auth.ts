import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from "fastify";
import { type Caller, roleAllows } from "../auth/roles.js";
import { roleNeeded } from "../auth/route-roles.js";
import { BOOTSTRAP_TOKEN_NAME, type TokenStore } from "../auth/token-store.js";
import { clawgateError } from "../resources/errors.js";
import { sendError } from "./errors.js";
import { isPublicRoute } from "./public-routes.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The token that made the request; undefined on public routes and in an open app. */
    caller?: Caller;
  }
}

/**
 * Requires `Authorization: Bearer <token>` on every route but the public ones (probes, docs),
 * and on every path no route matches; then the role the route needs (auth/route-roles.ts), and
 * for a registrar, that the upstream in the path is one it was granted. Tokens are compared
 * as SHA-256 digests in constant time (TokenStore.authenticate). The request's log lines
 * carry the token's name from here on, never the token.
 */
export function bearerAuth(tokens: Pick<TokenStore, "authenticate">): onRequestHookHandler {
  return (request, reply, done) => {
    if (isPublicRoute(request.routeOptions.url)) return done();
    const header = request.headers.authorization ?? "";
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    const caller = match?.[1] === undefined ? undefined : tokens.authenticate(match[1]);
    if (caller === undefined) {
      reply.header("www-authenticate", 'Bearer realm="clawgate"');
      sendError(
        reply,
        clawgateError(
          "CLAWGATE_UNAUTHORIZED",
          header === "" ? "missing bearer token" : "invalid bearer token",
        ),
      );
      return;
    }
    request.caller = caller;
    const log = request.log.child({ token: caller.name });
    request.log = log;
    reply.log = log;
    const refusal = refuse(request, caller);
    if (refusal === undefined) return done();
    forbid(reply, refusal);
  };
}

/** Why `caller` may not make this request, or undefined when it may. */
function refuse(request: FastifyRequest, caller: Caller): string | undefined {
  const route = request.routeOptions.url;
  const needed = roleNeeded(request.method, route);
  if (!roleAllows(caller.role, needed)) {
    return `${request.method} ${route ?? "this path"} needs role ${needed}${needed === "admin" ? "" : " or admin"}; token ${caller.name} has role ${caller.role}`;
  }
  if (caller.role === "registrar") {
    const upstream = (request.params as { name?: string }).name;
    if (upstream === undefined || !caller.upstreams.includes(upstream)) {
      return `token ${caller.name} (role registrar) may register nodes only in ${caller.upstreams.join(", ")}, not in ${upstream ?? "this path"}; this needs role editor or admin`;
    }
  }
  return undefined;
}

function forbid(reply: FastifyReply, message: string): void {
  sendError(reply, clawgateError("CLAWGATE_FORBIDDEN", message));
}

/** Only the bootstrap token, for an app built without a token store (tests, tools). */
export function bootstrapOnly(token: string): Pick<TokenStore, "authenticate"> {
  const expected = createHash("sha256").update(token).digest();
  const caller: Caller = { name: BOOTSTRAP_TOKEN_NAME, role: "admin", upstreams: [] };
  return {
    authenticate: (secret) =>
      timingSafeEqual(createHash("sha256").update(secret).digest(), expected) ? caller : undefined,
  };
}
