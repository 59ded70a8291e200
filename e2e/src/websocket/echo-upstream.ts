import type { EventEmitter } from "node:events";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { acceptKey, readFrames, serverText } from "./ws-frames.js";

export interface EchoUpstream {
  address: string;
  /** WebSocket connections open now. */
  readonly open: number;
  close(): Promise<void>;
}

/**
 * A WebSocket echo server written by hand: it answers the handshake with 101 and sends every
 * text frame back prefixed with "echo: "; a close frame is answered and ends the socket.
 * GET /healthz answers {"status":"ok"} for the data plane's probes.
 */
export async function startEchoUpstream(): Promise<EchoUpstream> {
  const sockets = new Set<Socket>();
  const server = createServer((request, response) => {
    response.writeHead(request.url === "/healthz" ? 200 : 426, {
      "content-type": "application/json",
    });
    response.end(JSON.stringify({ status: "ok" }));
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const echo = echoWebSockets(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    get open() {
      return echo.open;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * The echo itself, on any server that emits 'upgrade' (node:http, or node:http2 with
 * allowHTTP1): 101, then every text frame back prefixed with "echo: "; a close frame is
 * answered and ends the socket. Counts the connections open.
 */
export function echoWebSockets(server: EventEmitter): { readonly open: number } {
  let open = 0;
  server.on("upgrade", (request: IncomingMessage, socket: Socket, head: Buffer) => {
    const key = request.headers["sec-websocket-key"] ?? "";
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n" +
        `sec-websocket-accept: ${acceptKey(key)}\r\n\r\n`,
    );
    open++;
    socket.on("close", () => open--);
    socket.on("error", () => socket.destroy());
    // node:http leaves an upgraded socket half-open when the peer ends: end ours too.
    socket.on("end", () => socket.end());
    let pending = head;
    socket.on("data", (chunk: Buffer) => {
      const { frames, rest } = readFrames(Buffer.concat([pending, chunk]));
      pending = rest;
      for (const frame of frames) {
        if (frame.opcode === 0x8) {
          socket.end(Buffer.from([0x88, 0x02, 0x03, 0xe8]));
          return;
        }
        socket.write(serverText(Buffer.concat([Buffer.from("echo: "), frame.payload])));
      }
    });
  });
  return {
    get open() {
      return open;
    },
  };
}
