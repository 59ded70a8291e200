import {
  declareSettings,
  hostPortSetting,
  type SettingsOf,
  WATCHDOG_SETTINGS,
} from "@clawgate/runtime";
import { z } from "zod";
import { isDnsServer } from "./dns-server.js";
import { trustedProxyCidr } from "./trusted-proxies.js";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/**
 * The data plane's settings, declared once: name (the YAML key), variable, flag, default, doc
 * and type. The loader, its error messages and `--help` all read this table.
 */
export const DATA_PLANE_SETTINGS = declareSettings({
  proxyListen: {
    variable: "CLAWGATE_PROXY_LISTEN",
    flag: "proxy-listen",
    doc: "Where the proxy accepts client traffic; port 0 picks a free one.",
    type: hostPortSetting("listen"),
    default: "0.0.0.0:8080",
  },
  proxyTlsListen: {
    variable: "CLAWGATE_PROXY_TLS_LISTEN",
    flag: "proxy-tls-listen",
    doc: "Where the proxy accepts HTTPS (TLS 1.2+, ALPN h2 and http/1.1) beside proxyListen; needs proxyTlsCertFile and proxyTlsKeyFile.",
    type: hostPortSetting("listen"),
    defaultText: "none: no TLS listener",
  },
  proxyTlsCertFile: {
    variable: "CLAWGATE_PROXY_TLS_CERT_FILE",
    flag: "proxy-tls-cert-file",
    doc: "PEM certificate (chain) served when no proxyTlsCertificates entry matches the SNI name; reloaded when the file changes.",
    type: z.string().min(1),
  },
  proxyTlsKeyFile: {
    variable: "CLAWGATE_PROXY_TLS_KEY_FILE",
    flag: "proxy-tls-key-file",
    doc: "PEM private key of proxyTlsCertFile.",
    type: z.string().min(1),
  },
  proxyTlsCertificates: {
    variable: "CLAWGATE_PROXY_TLS_CERTIFICATES",
    flag: "proxy-tls-certificates",
    doc: "More certificates, chosen by SNI from the DNS names in each one's SAN: certFile:keyFile pairs (comma list).",
    type: z.array(
      z.string().regex(/^[^:]+:[^:]+$/, "must be certFile:keyFile (paths without ':')"),
    ),
    default: [],
    defaultText: "none: the default certificate only",
  },
  adminListen: {
    variable: "CLAWGATE_DP_ADMIN_LISTEN",
    flag: "admin-listen",
    doc: "Admin listener (/metrics, /healthz, /readyz, /config_dump); loopback so it is never exposed by accident.",
    type: hostPortSetting("listen"),
    default: "127.0.0.1:9901",
  },
  cpAddresses: {
    variable: "CLAWGATE_CP_ADDRESSES",
    flag: "cp-addresses",
    doc: "Control planes to stream snapshots from, tried in turn (comma list; the flag may repeat).",
    type: z.array(hostPortSetting("dial")).min(1),
    default: ["127.0.0.1:9190"],
  },
  nodeId: {
    variable: "CLAWGATE_NODE_ID",
    flag: "node-id",
    doc: "Identity reported to the control plane.",
    type: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,252}$/, "must be 1-253 of A-Z a-z 0-9 . _ : -"),
    defaultText: "hostname and proxy port",
  },
  cacheDir: {
    variable: "CLAWGATE_CACHE_DIR",
    flag: "cache-dir",
    doc: "Where the last good snapshot is kept across restarts (under systemd, its StateDirectory).",
    type: z.string().min(1),
    default: "./.clawgate/cache",
  },
  logLevel: {
    variable: "CLAWGATE_LOG_LEVEL",
    flag: "log-level",
    doc: "pino log level.",
    type: z.enum(LOG_LEVELS),
    default: "info",
  },
  accessLog: {
    variable: "CLAWGATE_ACCESS_LOG",
    flag: "access-log",
    doc: "One JSON line per request: stdout, off, or a file path (appended to, reopened on SIGHUP for logrotate).",
    type: z.string().min(1),
    default: "stdout",
  },
  accessLogSample: {
    variable: "CLAWGATE_ACCESS_LOG_SAMPLE",
    flag: "access-log-sample",
    // Errors are the lines someone searches for; successes are what fills a busy disk.
    doc: "Share of successful requests (status < 500, no failure) that get an access-log line, 0..1; errors always do.",
    type: z.number().min(0).max(1),
    default: 1,
  },
  proxyKeepAliveTimeoutMs: {
    variable: "CLAWGATE_PROXY_KEEPALIVE_TIMEOUT_MS",
    flag: "proxy-keepalive-timeout-ms",
    // Above the 60 s idle timeout common load balancers use, so an LB never reuses a socket
    // the proxy has just closed.
    doc: "How long an idle client connection stays open; above the 60 s idle timeout of common load balancers.",
    type: z.int().min(1_000).max(3_600_000),
    default: 65_000,
  },
  proxyHeadersTimeoutMs: {
    variable: "CLAWGATE_PROXY_HEADERS_TIMEOUT_MS",
    flag: "proxy-headers-timeout-ms",
    // nginx's client_header_timeout (60 s); Envoy's request_headers_timeout is off by default.
    // Its own setting: it used to follow the keep-alive timeout, which may be up to an hour.
    doc: "How long a client may take to send a request's headers before it gets 408 and the connection closes.",
    type: z.int().min(100).max(3_600_000),
    default: 60_000,
  },
  proxyRequestTimeoutMs: {
    variable: "CLAWGATE_PROXY_REQUEST_TIMEOUT_MS",
    flag: "proxy-request-timeout-ms",
    // node:http's own default, set explicitly so a Node upgrade cannot change it unseen. It
    // bounds a whole upload (headers and body); a route's bodyMs and totalMs are tighter.
    doc: "How long a client may take to send a whole request, headers and body, before it gets 408 (0 = no limit; at least proxyHeadersTimeoutMs).",
    type: z.int().min(0).max(86_400_000),
    default: 300_000,
  },
  proxyMaxConnections: {
    variable: "CLAWGATE_PROXY_MAX_CONNECTIONS",
    flag: "proxy-max-connections",
    // No default cap: the right one depends on the file limit (the systemd unit's LimitNOFILE
    // is 524288) and memory, and a cap below what a load balancer keeps open would refuse
    // healthy traffic. Per process: with workers, each worker's listener has it.
    doc: "Client connections each proxy listener (plaintext and TLS) keeps open at once, per process; past it a new one is closed at once.",
    type: z.int().min(1).max(10_000_000),
    defaultText: "none: no cap",
  },
  proxyMaxConcurrentStreams: {
    variable: "CLAWGATE_PROXY_MAX_CONCURRENT_STREAMS",
    flag: "proxy-max-concurrent-streams",
    // nginx's http2_max_concurrent_streams (128 is its default) and the RFC 9113 advice of at
    // least 100; Node's own default is 2^32 - 1, which lets one connection open any number.
    doc: "HTTP/2 streams one client connection of the TLS listener may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).",
    type: z.int().min(1).max(2_147_483_647),
    default: 100,
  },
  trustedProxies: {
    variable: "CLAWGATE_TRUSTED_PROXIES",
    flag: "trusted-proxies",
    // Trust no one by default: a client-facing gateway must not pass on a client's claims of
    // where it came from. Behind a load balancer, list its addresses.
    doc: "Peers (CIDRs, comma list) whose X-Forwarded-For is appended to and whose X-Forwarded-Proto, X-Forwarded-Host, Forwarded, X-Real-IP, X-Original-URL and X-Rewrite-URL are kept; from others they are replaced or dropped.",
    type: z.array(trustedProxyCidr),
    default: [],
    defaultText: "none: trust no peer",
  },
  dnsRefreshMs: {
    variable: "CLAWGATE_DNS_REFRESH_MS",
    flag: "dns-refresh-ms",
    // Envoy's dns_refresh_rate default. A busy keep-alive connection never resolves again by
    // itself; this is how long it may stay on an address its node's name no longer has.
    doc: "How often upstream nodes given as DNS names are resolved again; a changed answer retires their connections gracefully (0 = off).",
    type: z.int().min(0).max(3_600_000),
    default: 5_000,
  },
  dnsServers: {
    variable: "CLAWGATE_DNS_SERVERS",
    flag: "dns-servers",
    doc: "DNS servers that resolve upstream node names, ip or ip:port (comma list), instead of the system resolver.",
    type: z.array(
      z
        .string()
        .refine((server) => isDnsServer(server), "must be an IP address, ip:port or [ipv6]:port"),
    ),
    default: [],
    defaultText: "none: the system resolver (/etc/resolv.conf, /etc/hosts)",
  },
  cacheFallbackAfterMs: {
    variable: "CLAWGATE_CACHE_FALLBACK_AFTER_MS",
    flag: "cache-fallback-after-ms",
    // The connect timeout of one control plane, so a live one always wins the race.
    doc: "How long to wait for a control plane at boot before serving the cached snapshot.",
    type: z.int().min(0).max(600_000),
    default: 5_000,
  },
  ...WATCHDOG_SETTINGS,
  drainTimeoutMs: {
    variable: "CLAWGATE_DRAIN_TIMEOUT_MS",
    flag: "drain-timeout-ms",
    doc: "How long SIGTERM waits for requests in flight; under systemd's TimeoutStopSec=15.",
    type: z.int().min(0).max(600_000),
    default: 10_000,
  },
  drainDelayMs: {
    variable: "CLAWGATE_DRAIN_DELAY_MS",
    flag: "drain-delay-ms",
    // Under Kubernetes the endpoint is removed while SIGTERM is delivered, and load balancers
    // take a few seconds to notice; without the delay clients connecting then are refused.
    // Keep drainDelayMs + drainTimeoutMs under TimeoutStopSec or terminationGracePeriodSeconds.
    doc: "How long after SIGTERM the proxy keeps serving, /readyz already 503, before the drain begins.",
    type: z.int().min(0).max(600_000),
    default: 0,
  },
  replayBodyLimitBytes: {
    variable: "CLAWGATE_REPLAY_BODY_LIMIT_BYTES",
    flag: "replay-body-limit-bytes",
    doc: "Largest request body kept in memory for a retry; a larger one streams once and is never retried.",
    type: z.int().min(0).max(67_108_864),
    default: 65_536,
  },
  workers: {
    variable: "CLAWGATE_WORKERS",
    flag: "workers",
    // One process per core is how Node uses more than one; 1 keeps the single-process path.
    doc: "Proxy worker processes behind the one listener (node:cluster); `auto` for the number of CPUs.",
    type: z.union([
      z.literal("auto"),
      z.int().min(1).max(256),
      z
        .string()
        .regex(/^[0-9]+$/, "must be a whole number or auto")
        .transform(Number)
        .pipe(z.int().min(1).max(256)),
    ]),
    default: 1,
  },
  workerApplyTimeoutMs: {
    variable: "CLAWGATE_WORKER_APPLY_TIMEOUT_MS",
    flag: "worker-apply-timeout-ms",
    // Far above the few seconds a worker takes to compile a 20,000-route snapshot in turns on
    // a busy core: only a worker whose event loop is stuck misses it.
    doc: "With workers > 1: how long an apply waits for a worker to answer prepare or commit before it is deemed hung, killed (SIGKILL) and replaced.",
    type: z.int().min(100).max(600_000),
    default: 30_000,
  },
  workerPingIntervalMs: {
    variable: "CLAWGATE_WORKER_PING_INTERVAL_MS",
    flag: "worker-ping-interval-ms",
    doc: "With workers > 1: how often the first process pings each worker to see that its event loop turns.",
    type: z.int().min(10).max(60_000),
    default: 1_000,
  },
  workerMaxMissedPings: {
    variable: "CLAWGATE_WORKER_MAX_MISSED_PINGS",
    flag: "worker-max-missed-pings",
    // 10 s at the default interval: twice the stall the primary's own watchdog tolerates
    // (watchdogMaxEventLoopDelayMs), so a busy host does not cost a healthy worker its life.
    doc: "With workers > 1: pings in a row a worker may leave unanswered before it is deemed hung, killed (SIGKILL) and replaced.",
    type: z.int().min(1).max(1_000),
    default: 10,
  },
  workerHelloTimeoutMs: {
    variable: "CLAWGATE_WORKER_HELLO_TIMEOUT_MS",
    flag: "worker-hello-timeout-ms",
    // Far above the second or so a worker takes to load its code on a busy 2-core machine; a
    // worker that has not said hello is not pinged yet, so only this deadline finds it hung.
    doc: "With workers > 1: how long a forked worker may take to load and say hello before it is deemed hung, killed (SIGKILL) and replaced.",
    type: z.int().min(10).max(600_000),
    default: 30_000,
  },
  cpTlsCaFile: {
    variable: "CLAWGATE_CP_TLS_CA_FILE",
    flag: "cp-tls-ca-file",
    doc: "PEM CA bundle the control planes' certificates must chain to; setting it turns TLS on.",
    type: z.string().min(1),
    defaultText: "none: plaintext",
  },
  cpTlsCertFile: {
    variable: "CLAWGATE_CP_TLS_CERT_FILE",
    flag: "cp-tls-cert-file",
    doc: "PEM client certificate for mutual TLS; needs cpTlsKeyFile and cpTlsCaFile.",
    type: z.string().min(1),
  },
  cpTlsKeyFile: {
    variable: "CLAWGATE_CP_TLS_KEY_FILE",
    flag: "cp-tls-key-file",
    doc: "PEM private key of cpTlsCertFile.",
    type: z.string().min(1),
  },
  cpTlsServerName: {
    variable: "CLAWGATE_CP_TLS_SERVER_NAME",
    flag: "cp-tls-server-name",
    doc: "Name checked in the control plane's certificate (and sent as SNI), e.g. when dialling by IP.",
    type: z
      .string()
      .regex(/^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/, "must be a host name"),
    defaultText: "the host of each address",
  },
});

export type DataPlaneSettings = SettingsOf<typeof DATA_PLANE_SETTINGS>;

/** The validated, frozen settings the data plane runs with, its node id filled in. */
export type DataPlaneConfig = Readonly<
  Omit<DataPlaneSettings, "nodeId" | "cpAddresses"> & {
    nodeId: string;
    cpAddresses: readonly string[];
  }
>;
