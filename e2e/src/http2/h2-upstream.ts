import { readFileSync } from "node:fs";
import {
  createSecureServer,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type Http2Session,
} from "node:http2";
import type { AddressInfo, Socket } from "node:net";
import { echoWebSockets } from "../websocket/echo-upstream.js";

/** What the HTTP/2 upstream answers: how the request reached it. */
export interface H2UpstreamReply {
  httpVersion: string;
  method: string;
  path: string;
  /** The request's Host (HTTP/1.1) or :authority (HTTP/2). */
  authority: string | undefined;
  bodyBytes: number;
}

export interface H2Upstream {
  /** host:port, as an upstream node address. */
  address: string;
  /** WebSocket tunnels open now. */
  readonly webSockets: number;
  close(): Promise<void>;
}

/**
 * An HTTPS upstream that speaks HTTP/2 (and HTTP/1.1 to clients that do not offer h2), and
 * answers each request with the protocol it came over, so a test sees which one the data
 * plane chose. GET /healthz answers {"status":"ok"} for the probes. A WebSocket handshake
 * (HTTP/1.1 Upgrade) gets the echo of websocket/echo-upstream.ts.
 */
export async function startH2Upstream(tls: {
  certFile: string;
  keyFile: string;
}): Promise<H2Upstream> {
  const server = createSecureServer(
    { cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile), allowHTTP1: true },
    (request: Http2ServerRequest, response: Http2ServerResponse) => {
      let bodyBytes = 0;
      request.on("data", (chunk: Buffer) => {
        bodyBytes += chunk.length;
      });
      request.on("end", () => {
        response.setHeader("content-type", "application/json");
        if (request.url === "/healthz") {
          response.end(JSON.stringify({ status: "ok" }));
          return;
        }
        const reply: H2UpstreamReply = {
          httpVersion: request.httpVersion,
          method: request.method,
          path: request.url,
          authority: request.authority || request.headers.host,
          bodyBytes,
        };
        response.end(JSON.stringify(reply));
      });
    },
  );
  const sessions = new Set<Http2Session>();
  server.on("session", (session: Http2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  // HTTP/1.1 connections (WebSocket tunnels among them), closed with the server too.
  const sockets = new Set<Socket>();
  server.on("secureConnection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  // WebSocket handshakes come as HTTP/1.1 Upgrade (an HTTP/2 connection cannot carry one).
  const echo = echoWebSockets(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    get webSockets() {
      return echo.open;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Sessions kept open by the data plane's pool would hold close() until they idle out.
        for (const session of sessions) session.destroy();
        for (const socket of sockets) socket.destroy();
      }),
  };
}
