import { hostname } from "node:os";
import {
  declareSettings,
  hostPortSetting,
  type SettingsOf,
  WATCHDOG_SETTINGS,
} from "@clawgate/runtime";
import { z } from "zod";

/**
 * The control plane's settings, declared once: name (the YAML key), variable, flag, default,
 * doc and type. The loader, its error messages and `--help` all read this table.
 */
export const CONTROL_PLANE_SETTINGS = declareSettings({
  adminListen: {
    variable: "CLAWGATE_ADMIN_LISTEN",
    flag: "admin-listen",
    doc: "Admin API; loopback so it is never exposed by accident.",
    type: hostPortSetting("listen"),
    default: "127.0.0.1:9180",
  },
  grpcListen: {
    variable: "CLAWGATE_GRPC_LISTEN",
    flag: "grpc-listen",
    doc: "gRPC snapshot service the data planes connect to.",
    type: hostPortSetting("listen"),
    default: "127.0.0.1:9190",
  },
  etcdEndpoints: {
    variable: "CLAWGATE_ETCD_ENDPOINTS",
    flag: "etcd-endpoints",
    doc: "etcd client URLs (comma list); unset selects the embedded file store.",
    type: z.array(z.url()),
    default: [],
    defaultText: "none: the embedded store",
  },
  etcdPrefix: {
    variable: "CLAWGATE_ETCD_PREFIX",
    flag: "etcd-prefix",
    doc: "Key prefix of everything Clawgate keeps in etcd.",
    type: z.string().regex(/^\/([^/]+\/)*$/, "must start and end with '/'"),
    default: "/clawgate/",
  },
  storePath: {
    variable: "CLAWGATE_STORE_PATH",
    flag: "store-path",
    doc: "File of the embedded store.",
    type: z.string().min(1),
    default: "./.clawgate/store.json",
  },
  adminToken: {
    variable: "CLAWGATE_ADMIN_TOKEN",
    flag: "admin-token",
    doc: "Bearer token of the admin API; prefer adminTokenFile, which keeps it out of ps.",
    type: z.string().min(16, "must be at least 16 characters"),
    secret: true,
  },
  adminTokenFile: {
    variable: "CLAWGATE_ADMIN_TOKEN_FILE",
    flag: "admin-token-file",
    doc: "File holding the admin token; when neither is set one is generated into this file.",
    type: z.string().min(1),
    default: "./.clawgate/admin-token",
  },
  staleGraceMs: {
    variable: "CLAWGATE_STALE_GRACE_MS",
    flag: "stale-grace-ms",
    doc: "Time a data plane may lag the published version before it shows as STALE.",
    type: z.int().min(0).max(3_600_000),
    default: 10_000,
  },
  instanceId: {
    variable: "CLAWGATE_INSTANCE_ID",
    flag: "instance-id",
    doc: "Names this replica in logs and snapshot nonces; at most 200 characters.",
    // At most 200: it is the prefix of every snapshot nonce, which data planes echo back within
    // STREAM_LIMITS.nonceLength (256).
    type: z.string().min(1).max(200),
    default: `${hostname()}-${process.pid}`,
    defaultText: "hostname and PID",
  },
  logLevel: {
    variable: "CLAWGATE_LOG_LEVEL",
    flag: "log-level",
    doc: "pino log level.",
    type: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]),
    default: "info",
  },
  ...WATCHDOG_SETTINGS,
  drainTimeoutMs: {
    variable: "CLAWGATE_DRAIN_TIMEOUT_MS",
    flag: "drain-timeout-ms",
    doc: "How long SIGTERM waits for admin requests in flight; under systemd's TimeoutStopSec=15.",
    type: z.int().min(0).max(600_000),
    default: 10_000,
  },
  leaderTtlSeconds: {
    variable: "CLAWGATE_LEADER_TTL_SECONDS",
    flag: "leader-ttl-seconds",
    doc: "etcd session TTL of the remediation leader: how long a dead leader blocks another.",
    type: z.int().min(1).max(600),
    default: 10,
  },
  applyLeaseTtlSeconds: {
    variable: "CLAWGATE_APPLY_LEASE_TTL_SECONDS",
    flag: "apply-lease-ttl-seconds",
    doc: "etcd lease of a big apply's owner, renewed while it runs: how long a crashed apply blocks writes.",
    type: z.int().min(1).max(600),
    default: 5,
  },
  grpcTlsCertFile: {
    variable: "CLAWGATE_GRPC_TLS_CERT_FILE",
    flag: "grpc-tls-cert-file",
    doc: "PEM certificate chain the snapshot service presents, with grpcTlsKeyFile.",
    type: z.string().min(1),
    defaultText: "none: plaintext",
  },
  grpcTlsKeyFile: {
    variable: "CLAWGATE_GRPC_TLS_KEY_FILE",
    flag: "grpc-tls-key-file",
    doc: "PEM private key of grpcTlsCertFile; set both or neither.",
    type: z.string().min(1),
  },
  grpcTlsClientCaFile: {
    variable: "CLAWGATE_GRPC_TLS_CLIENT_CA_FILE",
    flag: "grpc-tls-client-ca-file",
    doc: "PEM CA that must have signed the data planes' certificates (mutual TLS).",
    type: z.string().min(1),
    defaultText: "none: client certificates not asked for",
  },
  adminTlsCertFile: {
    variable: "CLAWGATE_ADMIN_TLS_CERT_FILE",
    flag: "admin-tls-cert-file",
    doc: "PEM certificate chain the admin API presents (HTTPS), with adminTlsKeyFile.",
    type: z.string().min(1),
    defaultText: "none: plain HTTP",
  },
  adminTlsKeyFile: {
    variable: "CLAWGATE_ADMIN_TLS_KEY_FILE",
    flag: "admin-tls-key-file",
    doc: "PEM private key of adminTlsCertFile; set both or neither.",
    type: z.string().min(1),
  },
  grpcMaxStreams: {
    variable: "CLAWGATE_GRPC_MAX_STREAMS",
    flag: "grpc-max-streams",
    doc: "Snapshot streams open at once; one more is refused with RESOURCE_EXHAUSTED.",
    type: z.int().min(1).max(1_000_000),
    default: 1024,
  },
  quotaMinuteMs: {
    variable: "CLAWGATE_QUOTA_MINUTE_MS",
    flag: "quota-minute-ms",
    doc: "Window of tenants' requestsPerMinute and tokensPerMinute; shorter only to test resets.",
    type: z.int().min(1_000).max(3_600_000),
    default: 60_000,
  },
  quotaDayMs: {
    variable: "CLAWGATE_QUOTA_DAY_MS",
    flag: "quota-day-ms",
    doc: "Window of tenants' tokensPerDay; shorter only to test resets.",
    type: z.int().min(1_000).max(604_800_000),
    default: 86_400_000,
  },
  historyLimit: {
    variable: "CLAWGATE_HISTORY_LIMIT",
    flag: "history-limit",
    doc: "Config versions kept for GET /v1/history and rollback; older ones cannot be restored.",
    type: z.int().min(1).max(10_000),
    default: 100,
  },
  historyMaxBytes: {
    variable: "CLAWGATE_HISTORY_MAX_BYTES",
    flag: "history-max-bytes",
    doc: "Bytes the config history may take in etcd; the oldest versions beyond it are trimmed. 256 MiB keeps etcd well under its 2 GiB quota beside the config, a big apply's undo records and the journals.",
    type: z.int().min(1_048_576).max(1_073_741_824),
    default: 268_435_456,
  },
  remediationCommands: {
    variable: "CLAWGATE_REMEDIATION_COMMANDS",
    flag: "remediation-commands",
    doc: "Executables (absolute paths, comma list) an upstream's remediation.command may run; empty refuses every command.",
    type: z.array(z.string().regex(/^\//, "must be an absolute path")),
    default: [],
    defaultText: "none: commands refused",
  },
  remediationWebhookOrigins: {
    variable: "CLAWGATE_REMEDIATION_WEBHOOK_ORIGINS",
    flag: "remediation-webhook-origins",
    doc: "Origins (scheme://host[:port], comma list) an upstream's remediation.webhookUrl may call; empty refuses every webhook.",
    type: z.array(z.url()),
    default: [],
    defaultText: "none: webhooks refused",
  },
  remediationAllowRoot: {
    variable: "CLAWGATE_REMEDIATION_ALLOW_ROOT",
    flag: "remediation-allow-root",
    doc: "Run remediation commands when the control plane runs as root; off, a hook is refused rather than run as root.",
    type: z.boolean(),
    default: false,
  },
  remediationMaxConcurrent: {
    variable: "CLAWGATE_REMEDIATION_MAX_CONCURRENT",
    flag: "remediation-max-concurrent",
    doc: "Remediation hooks run at once; more wait their turn, so a new leader with thousands of evicted nodes does not fork thousands.",
    type: z.int().min(1).max(1_024),
    default: 16,
  },
});

/** Control-plane settings, after defaults, the YAML file, CLAWGATE_* variables and flags. */
export type ControlPlaneSettings = SettingsOf<typeof CONTROL_PLANE_SETTINGS>;
