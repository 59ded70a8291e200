import type { Socket } from "node:net";
import type { buildConnector as BuildConnector } from "undici";
import { isTlsFailureCode } from "../errors/tls-failure-code.js";
import type { LookupFunction } from "./node-resolver.js";
import { buildConnector } from "./undici-parts.js";
import type { UpstreamTlsOptions } from "./upstream-tls.js";

/**
 * undici's TLS connector with the upstream's settings, plus one fix: a node that refuses us
 * after the handshake (TLS 1.3 sends "certificate required" once it has read our empty
 * certificate) leaves an SSL error on the socket and then an end of stream, and undici reports
 * the later "other side closed" as the request's error, a plain reset. Destroying the socket on
 * the TLS error keeps that error the one the request fails with, so it is counted as `tls`.
 */
export function tlsConnector(
  tls: UpstreamTlsOptions,
  timeoutMs: number,
  http2 = false,
  /** How the node's name is resolved (the dnsServers setting); default the system's. */
  lookup?: LookupFunction,
): BuildConnector.connector {
  const connect = buildConnector({
    // A custom connector must offer h2 itself: undici's allowH2 only sets it on its own one.
    ...(http2 ? { allowH2: true } : {}),
    // undici sends the node's host as SNI when it is a name and none is set (never an IP).
    servername: tls.servername,
    // The files parsed once for every connection (and the TLSv1.2 floor): given ca/cert/key
    // strings, tls.connect would parse them again for each one, 30 ms of CPU with a CA bundle.
    secureContext: tls.secureContext,
    rejectUnauthorized: tls.rejectUnauthorized,
    timeout: timeoutMs,
    ...(lookup === undefined ? {} : { lookup }),
  } as BuildConnector.BuildOptions);
  return (options, callback) =>
    connect(options, (error, socket) => {
      // On a failed connect there is no socket: the error is the request's already.
      if (error === null && socket) socket.on("error", destroyOnTlsError);
      callback(error, socket as never);
    });
}

function destroyOnTlsError(this: Socket, error: NodeJS.ErrnoException): void {
  if (error.code !== undefined && isTlsFailureCode(error.code)) this.destroy();
}
