import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { TLSSocket } from "node:tls";

export interface NamedUpstreamOptions {
  /** Port to listen on; default 0 (any free port). */
  port?: number;
  /** Address to listen on; default 127.0.0.1. */
  host?: string;
  /** Answer text/plain with just the name instead of JSON; default false. */
  plainText?: boolean;
  /**
   * Serve HTTPS with this PEM certificate and key (file paths); with `clientCaFile`, demand a
   * client certificate that CA signed. Default: plaintext HTTP.
   */
  tls?: { certFile: string; keyFile: string; clientCaFile?: string };
}

export interface NamedUpstream {
  name: string;
  port: number;
  /** host:port, as an upstream node address. */
  address: string;
  url: string;
  /** Requests served, /healthz excluded. */
  readonly requests: number;
  /** The request target of each request served, as it arrived; /healthz excluded. */
  readonly paths: readonly string[];
  close(): Promise<void>;
}

/** The JSON body a named upstream answers with. */
export interface NamedUpstreamReply {
  upstream: string;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Over TLS: the SNI name the client sent (false without one). */
  servername?: string | false | null;
}

/**
 * An HTTP server that answers every request with its own name, so a test can tell which node
 * a proxied request reached. GET /healthz answers {"status":"ok"} for the data plane's probes.
 */
export async function startNamedUpstream(
  name: string,
  options: NamedUpstreamOptions = {},
): Promise<NamedUpstream> {
  let requests = 0;
  const paths: string[] = [];
  const handler = (request: IncomingMessage, response: ServerResponse) => {
    // Drain the body so keep-alive connections stay usable.
    request.resume();
    request.on("end", () => {
      if (request.url === "/healthz") {
        respond(response, 200, "application/json", JSON.stringify({ status: "ok" }));
        return;
      }
      requests++;
      paths.push(request.url ?? "");
      if (options.plainText) {
        respond(response, 200, "text/plain; charset=utf-8", `${name}\n`);
        return;
      }
      const reply: NamedUpstreamReply = {
        upstream: name,
        method: request.method ?? "",
        path: request.url ?? "",
        headers: request.headers,
      };
      if (options.tls !== undefined) reply.servername = (request.socket as TLSSocket).servername;
      respond(response, 200, "application/json", JSON.stringify(reply));
    });
  };
  const tls = options.tls;
  const server =
    tls === undefined
      ? createServer(handler)
      : createHttpsServer(
          {
            cert: readFileSync(tls.certFile),
            key: readFileSync(tls.keyFile),
            ...(tls.clientCaFile === undefined
              ? {}
              : {
                  ca: readFileSync(tls.clientCaFile),
                  requestCert: true,
                  rejectUnauthorized: true,
                }),
          },
          handler,
        );
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  const port = address.port;
  return {
    name,
    port,
    address: `${host}:${port}`,
    url: `${tls === undefined ? "http" : "https"}://${host}:${port}`,
    get requests() {
      return requests;
    },
    paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function respond(response: ServerResponse, status: number, type: string, body: string): void {
  response.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
  response.end(body);
}
