import type { Server } from "node:http";

/**
 * Stops accepting and closes the server's connections. A full drain of requests in flight
 * comes with graceful shutdown; for now open connections are ended, so close never hangs.
 */
export function closeServer(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    server.closeAllConnections();
  });
}
