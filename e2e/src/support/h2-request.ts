import type { ClientHttp2Session, IncomingHttpHeaders } from "node:http2";

export interface H2Reply {
  headers: IncomingHttpHeaders;
  body: string;
  /** Bytes received with each DATA event, to see a stream arrive in pieces. */
  chunks: number;
}

/**
 * One request on an HTTP/2 session, read whole; bounded at 10 s. A body goes out as DATA frames
 * with no content-length header (node:http2 adds none), as many HTTP/2 clients send it.
 */
export function h2Request(
  session: ClientHttp2Session,
  headers: Record<string, string>,
  body?: string,
): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    stream.setTimeout(10_000, () => stream.close());
    let responseHeaders: IncomingHttpHeaders = {};
    let text = "";
    let chunks = 0;
    stream.on("response", (received) => {
      responseHeaders = received;
    });
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      text += chunk;
      chunks++;
    });
    stream.on("end", () => resolve({ headers: responseHeaders, body: text, chunks }));
    stream.on("error", reject);
    if (body !== undefined) stream.end(body);
  });
}
