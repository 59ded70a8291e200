import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { type Frame, maskedText, readFrames } from "./ws-frames.js";

/** A raw WebSocket client: the handshake's status line, then frames as they come. */
export interface WsClient {
  /** The first line of the handshake answer ("HTTP/1.1 101 Switching Protocols"). */
  statusLine: string;
  /** The whole handshake answer, headers and any body the proxy sent with a refusal. */
  answer: string;
  send(text: string): void;
  /** The next frame; rejects if the connection closes first. */
  next(): Promise<Frame>;
  /** Resolves when the connection closed. */
  closed: Promise<void>;
  socket: Socket;
}

export function openWs(
  proxyUrl: string,
  path: string,
  /** Extra handshake headers (an API key). */
  headers: Record<string, string> = {},
): Promise<WsClient> {
  const url = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let buffer = Buffer.alloc(0);
    let handshakeDone = false;
    const frames: Frame[] = [];
    const waiters: { resolve: (f: Frame) => void; reject: (e: Error) => void }[] = [];
    let ended = false;
    const closed = new Promise<void>((done) => socket.on("close", () => done()));
    socket.on("error", (error) => {
      if (!handshakeDone) reject(error);
    });
    socket.on("close", () => {
      ended = true;
      for (const waiter of waiters.splice(0)) waiter.reject(new Error("connection closed"));
    });
    const client: WsClient = {
      statusLine: "",
      answer: "",
      send: (text) => socket.write(maskedText(text)),
      next: () => {
        const frame = frames.shift();
        if (frame !== undefined) return Promise.resolve(frame);
        if (ended) return Promise.reject(new Error("connection closed"));
        return new Promise((res, rej) => waiters.push({ resolve: res, reject: rej }));
      },
      closed,
      socket,
    };
    const deliver = () => {
      const { frames: read, rest } = readFrames(buffer);
      buffer = Buffer.from(rest);
      for (const frame of read) {
        const waiter = waiters.shift();
        if (waiter) waiter.resolve(frame);
        else frames.push(frame);
      }
    };
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (handshakeDone) {
        deliver();
        return;
      }
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      client.statusLine = buffer.subarray(0, buffer.indexOf("\r\n")).toString();
      if (!client.statusLine.includes(" 101 ")) {
        // A refusal: read it to the end of the connection.
        socket.on("end", () => {
          client.answer = buffer.toString();
          handshakeDone = true;
          resolve(client);
        });
        return;
      }
      client.answer = buffer.subarray(0, end).toString();
      buffer = Buffer.from(buffer.subarray(end + 4));
      handshakeDone = true;
      resolve(client);
      deliver();
    });
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n` +
        Object.entries(headers)
          .map(([name, value]) => `${name}: ${value}\r\n`)
          .join("") +
        "\r\n",
    );
  });
}
