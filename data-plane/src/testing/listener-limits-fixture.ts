import type { ProxyTlsLimits } from "../tls-listener/proxy-tls-listener.js";

/** The data plane's default listener settings, for tests that build a listener by hand. */
export const DEFAULT_LISTENER_LIMITS: ProxyTlsLimits = Object.freeze({
  proxyKeepAliveTimeoutMs: 65_000,
  proxyHeadersTimeoutMs: 60_000,
  proxyRequestTimeoutMs: 300_000,
  proxyMaxConnections: undefined,
  proxyMaxConcurrentStreams: 100,
});
