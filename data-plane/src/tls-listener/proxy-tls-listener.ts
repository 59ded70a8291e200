import type { RequestListener } from "node:http";
import { createSecureServer, type Http2SecureServer } from "node:http2";
import { settingOrigin } from "@clawgate/runtime";
import type { Logger } from "pino";
import type { DataPlaneConfig } from "../config/config-schema.js";
import { applyListenerLimits, type ListenerLimits } from "../proxy/listener-limits.js";
import { acceptExtendedConnect } from "./extended-connect.js";
import { acceptHttp2 } from "./h2-request.js";
import { ProxyTlsCertificates, parseCertificateFiles } from "./proxy-tls-certificates.js";
import { SecureDrain } from "./secure-drain.js";

/**
 * The HTTPS listener beside the plaintext one: same handler, its own certificates and drain.
 * It speaks HTTP/2 to clients that offer `h2` in ALPN and HTTP/1.1 to the others, and takes
 * WebSocket handshakes of both: HTTP/1.1 Upgrade and HTTP/2 extended CONNECT (RFC 8441), each
 * handed to the server's 'upgrade' listeners.
 */
export interface ProxyTlsListener {
  readonly server: Http2SecureServer;
  readonly drain: SecureDrain;
  readonly certificates: ProxyTlsCertificates;
}

/**
 * Reads the proxy's certificates (a bad one throws a ConfigError naming the setting, before
 * anything listens); undefined when proxyTlsListen is not set.
 */
export function loadProxyTlsCertificates(
  config: DataPlaneConfig,
  logger: Logger,
): ProxyTlsCertificates | undefined {
  if (config.proxyTlsListen === undefined) return undefined;
  // The pairing check of the settings loader guarantees both files with a listener.
  return new ProxyTlsCertificates({
    defaultFiles: { certFile: config.proxyTlsCertFile!, keyFile: config.proxyTlsKeyFile! },
    sniFiles: config.proxyTlsCertificates.map(parseCertificateFiles),
    originOf: (field) => settingOrigin(config, field),
    logger,
  });
}

/** The listener settings of the TLS listener: the plaintext one's, and HTTP/2's stream cap. */
export type ProxyTlsLimits = ListenerLimits & Pick<DataPlaneConfig, "proxyMaxConcurrentStreams">;

/**
 * Builds the HTTPS server (HTTP/2 with HTTP/1.1 fallback on one port, as node:http2's
 * allowHTTP1 does) with the plaintext proxy's timeouts; listen() is the caller's.
 */
export function createProxyTlsListener(
  certificates: ProxyTlsCertificates,
  handler: RequestListener,
  limits: ProxyTlsLimits,
): ProxyTlsListener {
  const keepAliveTimeoutMs = limits.proxyKeepAliveTimeoutMs;
  const server = createSecureServer(
    {
      ...certificates.serverOptions(),
      allowHTTP1: true,
      // SETTINGS_ENABLE_CONNECT_PROTOCOL: clients may open WebSockets over HTTP/2.
      // SETTINGS_MAX_CONCURRENT_STREAMS: Node advertises 2^32 - 1, so one connection could
      // hold any number of requests in flight.
      settings: {
        enableConnectProtocol: true,
        maxConcurrentStreams: limits.proxyMaxConcurrentStreams,
      },
    },
    acceptHttp2(handler) as never,
  );
  // The HTTP/1.1 side: node:http reads these from the server, as on the plaintext listener.
  applyListenerLimits(server as never, limits);
  // An idle HTTP/2 connection is closed as an idle HTTP/1.1 one would be; close() is a GOAWAY,
  // so a stream still open (a quiet SSE stream) finishes first.
  server.on("session", (session) => session.setTimeout(keepAliveTimeoutMs, () => session.close()));
  acceptExtendedConnect(server);
  certificates.watch(server);
  const drain = new SecureDrain(server);
  return { server, drain, certificates };
}
