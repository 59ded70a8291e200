import { createServer, type Server } from "node:http";
import { splitHostPort } from "../listen.js";

/** The admin port's stand-in while the store cannot be reached yet. */
export interface UnreadyServer {
  /** What /readyz says is missing from now on. */
  setReason(reason: string): void;
  /** Frees the port for the real admin API. */
  close(): Promise<void>;
}

/**
 * Holds the admin address while the control plane waits for its store: /healthz answers 200 so
 * systemd or a kubelet does not kill a process that is only waiting for etcd, /readyz answers
 * 503 with the reason (the last etcd error) so nothing sends it traffic, and every other path
 * answers 503 with the same reason instead of a refused connection. Plain node:http: the real
 * admin app cannot be built before the store it serves exists.
 */
export async function startUnreadyServer(address: string, reason: string): Promise<UnreadyServer> {
  let current = reason;
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    const send = (status: number, body: unknown) => {
      response.writeHead(status, {
        "content-type": "application/json; charset=utf-8",
        "cache-control": "no-store",
      });
      response.end(JSON.stringify(body));
    };
    if (path === "/healthz") return send(200, { status: "ok" });
    if (path === "/readyz") return send(503, { status: "not ready", reason: current });
    send(503, {
      error: {
        code: "CLAWGATE_STORE_UNAVAILABLE",
        message: `the control plane is not serving yet: ${current}`,
      },
    });
  });
  const [host, port] = splitHostPort(address);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port }, () => {
      server.removeListener("error", reject);
      resolve();
    });
  });
  return {
    setReason(next) {
      current = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Probes keep connections alive; they must not hold the port the real API needs.
        server.closeAllConnections();
      }),
  };
}
