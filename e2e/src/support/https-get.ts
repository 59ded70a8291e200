import { request } from "node:https";
import type { TLSSocket } from "node:tls";

/** What an HTTPS GET got back: the status, body, HTTP version and the SAN the server showed. */
export interface HttpsReply {
  status: number;
  body: string;
  httpVersion: string;
  /** The presented certificate's subjectAltName ("DNS:a.test, ..."), "" when it has none. */
  san: string;
}

/**
 * A GET over HTTPS to 127.0.0.1 on a new connection, trusting only `ca`, offering only HTTP/1.1
 * in ALPN (node:https does); `servername` is the SNI sent, default none.
 */
export function httpsGet(
  port: number,
  path: string,
  ca: string,
  servername?: string,
): Promise<HttpsReply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        ca,
        ...(servername === undefined ? {} : { servername }),
        agent: false,
        timeout: 10_000,
      },
      (res) => {
        const san = (res.socket as TLSSocket).getPeerCertificate().subjectaltname ?? "";
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body, httpVersion: res.httpVersion, san }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}
