import type { Server as HttpServer, RequestListener } from "node:http";
import { createServer, type Server as HttpsServer } from "node:https";
import { HttpDrain } from "@clawgate/runtime";
import type { Logger } from "pino";
import type { DataPlaneConfig } from "../config/config-schema.js";
import { ProxyTlsCertificates, parseCertificateFiles } from "./proxy-tls-certificates.js";

/** The HTTPS listener beside the plaintext one: same handler, its own certificates and drain. */
export interface ProxyTlsListener {
  readonly server: HttpsServer;
  readonly drain: HttpDrain;
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
    logger,
  });
}

/** Builds the HTTPS server with the plaintext proxy's timeouts; listen() is the caller's. */
export function createProxyTlsListener(
  certificates: ProxyTlsCertificates,
  handler: RequestListener,
  keepAliveTimeoutMs: number,
): ProxyTlsListener {
  const server = createServer(certificates.serverOptions(), handler);
  server.keepAliveTimeout = keepAliveTimeoutMs;
  server.headersTimeout = keepAliveTimeoutMs + 1_000;
  certificates.watch(server);
  // https.Server has every method HttpDrain uses (it is an http.Server over TLS sockets).
  const drain = new HttpDrain(server as unknown as HttpServer);
  return { server, drain, certificates };
}
