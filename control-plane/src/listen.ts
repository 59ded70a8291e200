import { parseHostPort } from "@clawgate/runtime";
import type { Logger } from "pino";

// Loopback detection lives with host:port parsing in the runtime; main.ts imports it from here.
export { isLoopback } from "@clawgate/runtime";

/**
 * "127.0.0.1:9180" -> ["127.0.0.1", 9180], IPv6 hosts unbracketed, for server.listen(). Only
 * called on validated settings, so a parse failure is a bug, not bad input.
 */
export function splitHostPort(address: string): [string, number] {
  const parsed = parseHostPort(address, { allowPortZero: true });
  if (!parsed.ok) throw new Error(`${address}: ${parsed.reason}`);
  return [parsed.value.host, parsed.value.port];
}

/**
 * A listener that cannot bind ends the process with a clear message: a control plane alive
 * but not listening would look healthy to a supervisor while serving nothing (seed 000, 4.2).
 */
export function exitOnListenFailure(logger: Logger, what: string, address: string) {
  return (error: NodeJS.ErrnoException): never => {
    logger.fatal(
      { address, code: error.code, err: error.message },
      `cannot listen for the ${what} on ${address}: ${error.code ?? error.message}`,
    );
    process.exit(1);
  };
}
