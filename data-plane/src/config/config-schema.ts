import { z } from "zod";
import { parseHostPort } from "./host-port.js";

const hostPort = (allowPortZero: boolean) =>
  z.string().superRefine((value, ctx) => {
    const parsed = parseHostPort(value, { allowPortZero });
    if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.reason });
  });

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/**
 * The data plane's settings as every layer (YAML file, env, flags) spells them. Strict, so a
 * misspelt key in the file is an error rather than a silently ignored line.
 */
export const configSchema = z.strictObject({
  /** Where the proxy accepts client traffic; default 0.0.0.0:8080. Port 0 picks a free one. */
  proxyListen: hostPort(true).default("0.0.0.0:8080"),
  /** Admin listener (/metrics, /healthz, /readyz, /config_dump); default loopback 127.0.0.1:9901. */
  adminListen: hostPort(true).default("127.0.0.1:9901"),
  /** Control planes to stream snapshots from, tried in turn; default ["127.0.0.1:9190"]. */
  cpAddresses: z.array(hostPort(false)).min(1).default(["127.0.0.1:9190"]),
  /** Identity reported to the control plane; default `${hostname}-${proxy port}`. */
  nodeId: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,252}$/, "must be 1-253 of A-Z a-z 0-9 . _ : -")
    .optional(),
  /** Where the last good snapshot is kept across restarts; default ./.clawgate/cache. */
  cacheDir: z.string().min(1).default("./.clawgate/cache"),
  /** pino level; default info. */
  logLevel: z.enum(LOG_LEVELS).default("info"),
  /**
   * How long an idle client connection stays open; default 65 s, above the 60 s idle timeout
   * common load balancers use, so the LB never reuses a socket the proxy has just closed.
   */
  proxyKeepAliveTimeoutMs: z.int().min(1_000).max(3_600_000).default(65_000),
  /**
   * How long to wait for a control plane at boot before serving the cached snapshot; default
   * 5 s, the connect timeout of one control plane, so a live one always wins the race.
   */
  cacheFallbackAfterMs: z.int().min(0).max(600_000).default(5_000),
  /**
   * Longest event-loop stall per watchdog interval before WATCHDOG=1 is withheld; default 5 s
   * (a missed ping is close to a kill, and a whole fleet compiles one snapshot at once).
   */
  watchdogMaxEventLoopDelayMs: z.int().min(10).max(600_000).default(5_000),
  /** Used heap / V8 heap limit above which WATCHDOG=1 is withheld; default 0.9. */
  watchdogMaxHeapRatio: z.number().gt(0).max(1).default(0.9),
  /** How long SIGTERM waits for requests in flight; default 10 s, under TimeoutStopSec=15. */
  drainTimeoutMs: z.int().min(0).max(600_000).default(10_000),
  /**
   * How long after SIGTERM the proxy goes on accepting and serving, with /readyz already 503,
   * before the drain begins; default 0. Under Kubernetes the endpoint is removed while SIGTERM
   * is delivered, and load balancers take a few seconds to notice; without the delay clients
   * connecting in that window are refused. Keep drainDelayMs + drainTimeoutMs under systemd's
   * TimeoutStopSec or the pod's terminationGracePeriodSeconds.
   */
  drainDelayMs: z.int().min(0).max(600_000).default(0),
  /**
   * Largest request body kept in memory so a retry can send it again; default 64 KiB. A larger
   * body streams through once and its request is never retried.
   */
  replayBodyLimitBytes: z.int().min(0).max(67_108_864).default(65_536),
  /**
   * PEM CA bundle the control planes' certificates must chain to; setting it turns TLS on for
   * the snapshot stream. Default unset: plaintext, meant for loopback.
   */
  cpTlsCaFile: z.string().min(1).optional(),
  /** PEM client certificate for mutual TLS; needs cpTlsKeyFile and cpTlsCaFile. Default unset. */
  cpTlsCertFile: z.string().min(1).optional(),
  /** PEM private key of cpTlsCertFile. Default unset. */
  cpTlsKeyFile: z.string().min(1).optional(),
  /**
   * Name checked in the control plane's certificate instead of the host of each address (and
   * sent as SNI), e.g. when dialling by IP; default unset: the address's host.
   */
  cpTlsServerName: z
    .string()
    .regex(/^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/, "must be a host name")
    .optional(),
});

export type ConfigInput = z.input<typeof configSchema>;
export type ConfigField = keyof z.output<typeof configSchema>;

/** The validated, frozen settings the data plane runs with. */
export type DataPlaneConfig = Readonly<
  Omit<z.output<typeof configSchema>, "nodeId" | "cpAddresses"> & {
    nodeId: string;
    cpAddresses: readonly string[];
  }
>;
