import type { ClientHttp2Session, IncomingHttpHeaders } from "node:http2";
import { type Frame, maskedText, readFrames } from "./ws-frames.js";

/** A WebSocket opened on one HTTP/2 stream (RFC 8441): the response headers, then frames. */
export interface WsH2Client {
  /** The response's headers (`:status` 200 when the tunnel opened). */
  headers: IncomingHttpHeaders;
  /** The body of a refusal (the stream ended after it), "" for an open tunnel. */
  body: string;
  send(text: string): void;
  /** The next frame; rejects if the stream closes first. */
  next(): Promise<Frame>;
  /** Resolves when the stream closed. */
  closed: Promise<void>;
  close(): void;
}

/**
 * Opens a WebSocket with an extended CONNECT on `session`, whose server has said it takes
 * them (SETTINGS_ENABLE_CONNECT_PROTOCOL).
 */
export async function openWsOverH2(
  session: ClientHttp2Session,
  path: string,
  headers: Record<string, string> = {},
): Promise<WsH2Client> {
  // Node will not send an extended CONNECT before the server's SETTINGS allowed it; the
  // caller waits for them ('remoteSettings') when it connects.
  if (session.remoteSettings.enableConnectProtocol !== true) {
    throw new Error("the server does not advertise SETTINGS_ENABLE_CONNECT_PROTOCOL");
  }
  const stream = session.request(
    {
      ":method": "CONNECT",
      ":protocol": "websocket",
      ":path": path,
      ":scheme": "https",
      "sec-websocket-version": "13",
      ...headers,
    },
    { endStream: false },
  );
  let buffer = Buffer.alloc(0);
  const frames: Frame[] = [];
  const waiters: { resolve: (frame: Frame) => void; reject: (error: Error) => void }[] = [];
  let ended = false;
  const closed = new Promise<void>((done) => stream.on("close", () => done()));
  stream.on("close", () => {
    ended = true;
    for (const waiter of waiters.splice(0)) waiter.reject(new Error("stream closed"));
  });
  const response = await new Promise<IncomingHttpHeaders>((resolve, reject) => {
    stream.once("response", resolve);
    stream.once("error", reject);
  });
  stream.on("error", () => stream.destroy());
  const client: WsH2Client = {
    headers: response,
    body: "",
    send: (text) => stream.write(maskedText(text)),
    next: () => {
      const frame = frames.shift();
      if (frame !== undefined) return Promise.resolve(frame);
      if (ended) return Promise.reject(new Error("stream closed"));
      return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
    },
    closed,
    close: () => stream.close(),
  };
  if (Number(response[":status"]) !== 200) {
    // A refusal: its JSON body, to the end of the stream.
    stream.setEncoding("utf8");
    for await (const chunk of stream) client.body += chunk as string;
    return client;
  }
  stream.on("data", (chunk: Buffer) => {
    const { frames: read, rest } = readFrames(Buffer.concat([buffer, chunk]));
    buffer = Buffer.from(rest);
    for (const frame of read) {
      const waiter = waiters.shift();
      if (waiter) waiter.resolve(frame);
      else frames.push(frame);
    }
  });
  // The server ending its side (after a close frame) ends the tunnel: end ours too.
  stream.on("end", () => stream.end());
  return client;
}
