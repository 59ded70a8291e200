import type { IncomingHttpHeaders } from "node:http";
import type { Http2ServerRequest } from "node:http2";

/**
 * Gives an HTTP/2 request's HTTP/1.1 header view its Host: `:authority` when the client sent
 * it (RFC 9113 8.3.1: it is the request's authority), else the `host` field.
 *
 * A request that sends both naming different hosts SHOULD be malformed (same section), and
 * routing by one while a backend reads the other is the mismatch a repeated Host line makes in
 * HTTP/1.1. So it is given that view: its raw header lines then hold Host twice, which the
 * proxy's Host check (proxy/host-field.ts) answers with 400, the HTTP/1.1 and HTTP/2 paths
 * alike. The usual request, with one of them or both equal, costs a comparison. Spellings of
 * one host (case, the scheme's default port, a fully qualified name's trailing dot) are equal:
 * clients add ":443" to one field and not the other, and routing ignores both anyway.
 */
export function setHttp2Host(req: Http2ServerRequest, headers: IncomingHttpHeaders): void {
  const authority = req.headers[":authority"];
  if (typeof authority !== "string") return;
  const host = headers.host;
  headers.host = authority;
  if (host === undefined || host === authority) return;
  const defaultPort = req.scheme === "http" ? ":80" : ":443";
  if (sameHost(host, authority, defaultPort)) return;
  Object.defineProperty(req, "rawHeaders", {
    value: ["host", authority, "host", host],
    configurable: true,
  });
}

function sameHost(a: string, b: string, defaultPort: string): boolean {
  return hostSpelling(a, defaultPort) === hostSpelling(b, defaultPort);
}

/** Lower case, without the scheme's default port and a trailing root dot. */
function hostSpelling(value: string, defaultPort: string): string {
  let host = value.toLowerCase();
  if (host.endsWith(defaultPort)) host = host.slice(0, -defaultPort.length);
  if (host.endsWith(".")) host = host.slice(0, -1);
  return host;
}
