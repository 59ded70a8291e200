import { createHash, timingSafeEqual } from "node:crypto";
import type { onRequestHookHandler } from "fastify";
import { clawgateError } from "../resources/errors.js";
import { sendError } from "./errors.js";
import { isPublicRoute } from "./public-routes.js";

function digest(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

/**
 * Requires `Authorization: Bearer <token>` on every route but the public ones (probes, docs),
 * and on every path no route matches. Both sides are hashed first so the comparison takes the
 * same time whatever the length or content of the guess.
 */
export function bearerAuth(token: string): onRequestHookHandler {
  const expected = digest(token);
  return (request, reply, done) => {
    if (isPublicRoute(request.routeOptions.url)) return done();
    const header = request.headers.authorization ?? "";
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    if (match?.[1] !== undefined && timingSafeEqual(digest(match[1]), expected)) return done();
    reply.header("www-authenticate", 'Bearer realm="clawgate"');
    sendError(
      reply,
      clawgateError(
        "CLAWGATE_UNAUTHORIZED",
        header === "" ? "missing bearer token" : "invalid bearer token",
      ),
    );
  };
}
