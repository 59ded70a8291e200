import type { FastifyRequest } from "fastify";
import type { Logger } from "pino";

/**
 * What the admin API logs of each request: method, path and route, never the query string and
 * never a header. A token pasted into a URL (`?token=...`) or sent as `Authorization` must not
 * reach a log file that more people can read than hold the token.
 */
export function requestLogFields(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: pathOf(request.url),
    // The route pattern ("/v1/routes/:name") says what was called even when the path is odd.
    route: request.routeOptions?.url,
    remoteAddress: request.ip,
  };
}

/** The path of a request target, without "?query" or "#fragment". */
export function pathOf(url: string): string {
  const end = url.search(/[?#]/);
  return end < 0 ? url : url.slice(0, end);
}

/** A child of `logger` whose `req` serializer is `requestLogFields`; fastify logs through it. */
export function adminRequestLogger(logger: Logger): Logger {
  return logger.child({}, { serializers: { req: requestLogFields } });
}
