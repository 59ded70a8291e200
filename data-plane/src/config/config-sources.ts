import type { ConfigField } from "./config-schema.js";

type FieldKind = "string" | "list" | "int" | "number";

/** How one setting is spelt as an environment variable and as a flag. */
export interface FieldSource {
  env: string;
  flag: string;
  kind: FieldKind;
}

/** The single table of env vars and flags; docs, help and loader all read it. */
export const FIELD_SOURCES: Record<ConfigField, FieldSource> = {
  proxyListen: { env: "CLAWGATE_PROXY_LISTEN", flag: "proxy-listen", kind: "string" },
  adminListen: { env: "CLAWGATE_DP_ADMIN_LISTEN", flag: "admin-listen", kind: "string" },
  cpAddresses: { env: "CLAWGATE_CP_ADDRESSES", flag: "cp-addresses", kind: "list" },
  nodeId: { env: "CLAWGATE_NODE_ID", flag: "node-id", kind: "string" },
  cacheDir: { env: "CLAWGATE_CACHE_DIR", flag: "cache-dir", kind: "string" },
  logLevel: { env: "CLAWGATE_LOG_LEVEL", flag: "log-level", kind: "string" },
  proxyKeepAliveTimeoutMs: {
    env: "CLAWGATE_PROXY_KEEPALIVE_TIMEOUT_MS",
    flag: "proxy-keepalive-timeout-ms",
    kind: "int",
  },
  cacheFallbackAfterMs: {
    env: "CLAWGATE_CACHE_FALLBACK_AFTER_MS",
    flag: "cache-fallback-after-ms",
    kind: "int",
  },
  watchdogMaxEventLoopDelayMs: {
    env: "CLAWGATE_WATCHDOG_MAX_EVENT_LOOP_DELAY_MS",
    flag: "watchdog-max-event-loop-delay-ms",
    kind: "int",
  },
  watchdogMaxHeapRatio: {
    env: "CLAWGATE_WATCHDOG_MAX_HEAP_RATIO",
    flag: "watchdog-max-heap-ratio",
    kind: "number",
  },
  drainTimeoutMs: { env: "CLAWGATE_DRAIN_TIMEOUT_MS", flag: "drain-timeout-ms", kind: "int" },
  drainDelayMs: { env: "CLAWGATE_DRAIN_DELAY_MS", flag: "drain-delay-ms", kind: "int" },
  replayBodyLimitBytes: {
    env: "CLAWGATE_REPLAY_BODY_LIMIT_BYTES",
    flag: "replay-body-limit-bytes",
    kind: "int",
  },
  cpTlsCaFile: { env: "CLAWGATE_CP_TLS_CA_FILE", flag: "cp-tls-ca-file", kind: "string" },
  cpTlsCertFile: { env: "CLAWGATE_CP_TLS_CERT_FILE", flag: "cp-tls-cert-file", kind: "string" },
  cpTlsKeyFile: { env: "CLAWGATE_CP_TLS_KEY_FILE", flag: "cp-tls-key-file", kind: "string" },
  cpTlsServerName: {
    env: "CLAWGATE_CP_TLS_SERVER_NAME",
    flag: "cp-tls-server-name",
    kind: "string",
  },
};

/**
 * Turns the text of an env var or flag into the value the schema expects. Text that is not a
 * whole number is passed through unchanged so the schema's error shows what was given.
 */
export function fromText(kind: FieldKind, text: string): unknown {
  switch (kind) {
    case "string":
      return text;
    case "list":
      return text
        .split(",")
        .map((item) => item.trim())
        .filter((item) => item !== "");
    case "int":
      return /^-?\d+$/.test(text.trim()) ? Number(text.trim()) : text;
    case "number":
      return /^-?(\d+\.?\d*|\.\d+)$/.test(text.trim()) ? Number(text.trim()) : text;
  }
}
