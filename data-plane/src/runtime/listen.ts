import type { Server } from "node:net";
import { formatHostPort, parseHostPort } from "@clawgate/runtime";

/** A listener that could not bind; `code` is the system error (EADDRINUSE, EACCES, ...). */
export class ListenError extends Error {
  readonly code: string;
  readonly address: string;
  /** Which listener: "proxy", "proxy TLS", "admin". */
  readonly listener: string;

  constructor(name: string, address: string, cause: NodeJS.ErrnoException) {
    const code = cause.code ?? "UNKNOWN";
    super(`${name} cannot listen on ${address}: ${code} (${cause.message})`, { cause });
    this.name = "ListenError";
    this.code = code;
    this.address = address;
    this.listener = name;
  }
}

/**
 * Binds a server to `host:port` and resolves with the address actually bound (the real port
 * when 0 was asked for). A bind failure rejects with a ListenError naming the address, so the
 * caller can exit instead of living on without a listener.
 */
export function listen(server: Server, name: string, address: string): Promise<string> {
  const parsed = parseHostPort(address, { allowPortZero: true });
  if (!parsed.ok) return Promise.reject(new Error(`${name}: ${address} ${parsed.reason}`));
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => reject(new ListenError(name, address, err));
    server.once("error", onError);
    server.listen(parsed.value.port, parsed.value.host, () => {
      server.off("error", onError);
      const bound = server.address();
      resolve(
        typeof bound === "object" && bound !== null
          ? formatHostPort({ host: bound.address, port: bound.port })
          : String(bound),
      );
    });
  });
}
