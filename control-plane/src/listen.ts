import type { Logger } from "pino";

/** "127.0.0.1:9180" -> ["127.0.0.1", 9180]; IPv6 hosts come bracketed. */
export function splitHostPort(address: string): [string, number] {
  const colon = address.lastIndexOf(":");
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  return [host, Number(address.slice(colon + 1))];
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

/** True for addresses only this host can reach: 127.0.0.0/8, ::1 and localhost. */
export function isLoopback(address: string): boolean {
  const [host] = splitHostPort(address);
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}
