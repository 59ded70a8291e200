import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import { sendError } from "../errors/error-catalog.js";

/**
 * The last line of defence of the request path: a bug (a throw in the handler, a timer or an
 * event listener of one request) must cost that request, never the process. Every data plane
 * replays the same snapshot after a restart, so one poisoned route would otherwise crash-loop
 * the whole fleet. Answers 500 CLAWGATE_INTERNAL when nothing was sent yet, else cuts the
 * connection (a started response cannot take a JSON error), and logs one line. Returns 500
 * either way, the status the metrics count it under.
 */
export function failRequest(
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
  error: unknown,
  logger: Logger,
): number {
  // Method and path only: the query string may carry credentials.
  const url = req.url ?? "";
  const queryAt = url.indexOf("?");
  logger.error(
    {
      requestId,
      method: req.method,
      path: queryAt < 0 ? url : url.slice(0, queryAt),
      err: describe(error),
    },
    "request failed inside the proxy; answered 500",
  );
  try {
    if (!res.headersSent && !res.writableEnded && !res.destroyed) {
      return sendError(res, "CLAWGATE_INTERNAL", requestId);
    }
  } catch {
    // Writing the answer failed too: fall through and cut the connection.
  }
  res.destroy();
  return 500;
}

/** The error's message and stack; never the request it came from. */
function describe(error: unknown): { message: string; stack?: string } {
  if (error instanceof Error) return { message: error.message, stack: error.stack };
  return { message: String(error) };
}
