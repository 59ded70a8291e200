import { type IncomingHttpHeaders, request } from "node:http";

export interface PlainReply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface PlainRequestOptions {
  /** Default GET. */
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer;
  /** The body goes out in writes of this many bytes; default 256 KiB. */
  chunkBytes?: number;
}

/**
 * One request to a loopback `port` with a plain node:http client and no agent: undici would
 * refuse to send the hop-by-hop headers proxy tests send on purpose. The body is written in
 * several writes so it crosses the proxy as a stream, not one buffer.
 */
export function plainRequest(
  port: number,
  path: string,
  options: PlainRequestOptions = {},
): Promise<PlainReply> {
  const chunkBytes = options.chunkBytes ?? 256 * 1024;
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: options.method ?? "GET",
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    if (options.body) {
      for (let i = 0; i < options.body.length; i += chunkBytes) {
        req.write(options.body.subarray(i, i + chunkBytes));
      }
    }
    req.end();
  });
}

/** How a test client frames a request body: with its Content-Length, or chunked without one. */
export type BodyFraming = "declared" | "chunked";

/**
 * A POST of `body` with `headers`, framed as `framing` says (node:http sends a body without a
 * Content-Length chunked), in 64 KiB writes.
 */
export function framedPost(
  port: number,
  path: string,
  body: Buffer,
  framing: BodyFraming,
  headers: Record<string, string> = {},
): Promise<PlainReply> {
  return plainRequest(port, path, {
    method: "POST",
    headers: {
      ...headers,
      ...(framing === "declared" ? { "content-length": String(body.length) } : {}),
    },
    body,
    chunkBytes: 64 * 1024,
  });
}
