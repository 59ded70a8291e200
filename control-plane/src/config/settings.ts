import { hostname } from "node:os";
import { z } from "zod";

const listenAddress = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, "must be host:port")
  .refine(
    (value) => Number(value.slice(value.lastIndexOf(":") + 1)) <= 65535,
    "port must be 0-65535",
  );

/** Control-plane settings, after defaults, the YAML file, CLAWGATE_* variables and flags. */
export const controlPlaneSettingsSchema = z.strictObject({
  /** Admin API; loopback by default so it is never exposed by accident. */
  adminListen: listenAddress.default("127.0.0.1:9180"),
  /** gRPC snapshot service the data planes connect to. */
  grpcListen: listenAddress.default("127.0.0.1:9190"),
  /** etcd client URLs; empty selects the embedded file store. */
  etcdEndpoints: z.array(z.url()).default([]),
  /** Key prefix of everything Clawgate keeps in etcd; default /clawgate/. */
  etcdPrefix: z
    .string()
    .regex(/^\/([^/]+\/)*$/, "must start and end with '/'")
    .default("/clawgate/"),
  /** File of the embedded store; default ./.clawgate/store.json. */
  storePath: z.string().min(1).default("./.clawgate/store.json"),
  /** Bearer token of the admin API. */
  adminToken: z.string().min(16, "must be at least 16 characters").optional(),
  /** File holding the admin token; when neither is set one is generated into this file. */
  adminTokenFile: z.string().min(1).default("./.clawgate/admin-token"),
  /** Time a data plane may lag the published version before it shows as STALE; default 10 s. */
  staleGraceMs: z.int().min(0).max(3_600_000).default(10_000),
  /** Names this replica in logs and snapshot nonces; default hostname-pid. */
  // At most 200: it is the prefix of every snapshot nonce, which data planes echo back within
  // STREAM_LIMITS.nonceLength (256).
  instanceId: z.string().min(1).max(200).default(`${hostname()}-${process.pid}`),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** Longest event-loop stall per watchdog interval before WATCHDOG=1 is withheld; default 5 s. */
  watchdogMaxEventLoopDelayMs: z.int().min(10).max(600_000).default(5_000),
  /** Used heap / V8 heap limit above which WATCHDOG=1 is withheld; default 0.9. */
  watchdogMaxHeapRatio: z.number().gt(0).max(1).default(0.9),
  /** How long SIGTERM waits for admin requests in flight; default 10 s, under TimeoutStopSec=15. */
  drainTimeoutMs: z.int().min(0).max(600_000).default(10_000),
  /** etcd session TTL of the remediation leader: how long a dead leader blocks another; default 10 s. */
  leaderTtlSeconds: z.int().min(1).max(600).default(10),
  /** PEM certificate chain the snapshot service presents, with grpcTlsKeyFile; default unset (plaintext). */
  grpcTlsCertFile: z.string().min(1).optional(),
  /** PEM private key of grpcTlsCertFile; set both or neither. Default unset. */
  grpcTlsKeyFile: z.string().min(1).optional(),
  /** PEM CA that must have signed the data planes' certificates (mutual TLS); default unset. */
  grpcTlsClientCaFile: z.string().min(1).optional(),
  /** Snapshot streams open at once; one more is refused with RESOURCE_EXHAUSTED. Default 1024. */
  grpcMaxStreams: z.int().min(1).max(1_000_000).default(1024),
});

export type ControlPlaneSettings = Readonly<z.infer<typeof controlPlaneSettingsSchema>>;

/** Environment variables, and the setting each one sets. */
export const controlPlaneEnvironment: Record<string, keyof ControlPlaneSettings> = {
  CLAWGATE_ADMIN_LISTEN: "adminListen",
  CLAWGATE_GRPC_LISTEN: "grpcListen",
  CLAWGATE_ETCD_ENDPOINTS: "etcdEndpoints",
  CLAWGATE_ETCD_PREFIX: "etcdPrefix",
  CLAWGATE_STORE_PATH: "storePath",
  CLAWGATE_ADMIN_TOKEN: "adminToken",
  CLAWGATE_ADMIN_TOKEN_FILE: "adminTokenFile",
  CLAWGATE_STALE_GRACE_MS: "staleGraceMs",
  CLAWGATE_INSTANCE_ID: "instanceId",
  CLAWGATE_LOG_LEVEL: "logLevel",
  CLAWGATE_WATCHDOG_MAX_EVENT_LOOP_DELAY_MS: "watchdogMaxEventLoopDelayMs",
  CLAWGATE_WATCHDOG_MAX_HEAP_RATIO: "watchdogMaxHeapRatio",
  CLAWGATE_DRAIN_TIMEOUT_MS: "drainTimeoutMs",
  CLAWGATE_LEADER_TTL_SECONDS: "leaderTtlSeconds",
  CLAWGATE_GRPC_TLS_CERT_FILE: "grpcTlsCertFile",
  CLAWGATE_GRPC_TLS_KEY_FILE: "grpcTlsKeyFile",
  CLAWGATE_GRPC_TLS_CLIENT_CA_FILE: "grpcTlsClientCaFile",
  CLAWGATE_GRPC_MAX_STREAMS: "grpcMaxStreams",
};
