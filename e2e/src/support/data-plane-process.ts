import { join } from "node:path";
import { freePorts } from "./free-port.js";
import { httpStatus } from "./http-probe.js";
import { ManagedProcess, withTail } from "./managed-process.js";
import { metricValue } from "./metrics-text.js";
import { DATA_PLANE_BIN } from "./paths.js";
import { waitFor } from "./wait-for.js";
import { makeWorkDir, removeWorkDir } from "./work-dir.js";

export interface StartDataPlaneOptions {
  /** Name in error messages; default the node id. */
  name?: string;
  /** Working directory; default a new temp dir, removed by stop(). */
  cwd?: string;
  /** What to wait for: a snapshot applied (readyz), the process up (healthz), or nothing. Default readyz. */
  waitUntil?: "readyz" | "healthz" | "none";
  /** Deadline of that wait; default 20 s. */
  readyTimeoutMs?: number;
  /** Echo the process's output to stderr; default when E2E_VERBOSE is set. */
  echo?: boolean;
  /** The clawgate-data-plane.js to run; default this repository's build (DATA_PLANE_BIN). */
  bin?: string;
  /** Node options before the script (`--cpu-prof`, which NODE_OPTIONS refuses); default none. */
  nodeArgs?: string[];
}

export interface DataPlane {
  process: ManagedProcess;
  /** The complete environment it was started with: pass it again to restart it in place. */
  env: Record<string, string>;
  nodeId: string;
  /** http://127.0.0.1:<proxy port>, no trailing slash. */
  proxyUrl: string;
  adminUrl: string;
  /** The /metrics text. */
  metrics(): Promise<string>;
  /** clawgate_snapshot_version, or undefined before the first snapshot. */
  snapshotVersion(): Promise<number | undefined>;
  /** The /config_dump JSON. */
  configDump(): Promise<unknown>;
  /** GET /readyz status, or undefined when nothing answered. */
  readyStatus(): Promise<number | undefined>;
  /** SIGTERM, SIGKILL after 5 s; removes the temp dir it created. */
  stop(): Promise<void>;
  /** kill -9. */
  kill(): Promise<void>;
}

/**
 * Starts clawgate-data-plane with `env` on top of test defaults: proxy and admin on free
 * loopback ports, the snapshot cache in its work dir, the access log off. The caller gives
 * CLAWGATE_CP_ADDRESSES.
 */
export async function startDataPlane(
  env: Record<string, string>,
  options: StartDataPlaneOptions = {},
): Promise<DataPlane> {
  const ownsDir = options.cwd === undefined;
  const cwd = options.cwd ?? (await makeWorkDir("dp"));
  const [proxyPort, adminPort] = await freePorts(2);
  const full: Record<string, string> = {
    CLAWGATE_PROXY_LISTEN: `127.0.0.1:${proxyPort}`,
    CLAWGATE_DP_ADMIN_LISTEN: `127.0.0.1:${adminPort}`,
    CLAWGATE_NODE_ID: `dp-${proxyPort}`,
    CLAWGATE_CACHE_DIR: join(cwd, "cache"),
    CLAWGATE_LOG_LEVEL: "info",
    // Off unless a test asks: a line per request would push the lines tests look for out of
    // the output's 200-line tail.
    CLAWGATE_ACCESS_LOG: "off",
    ...env,
  };
  const nodeId = full.CLAWGATE_NODE_ID!;
  const name = options.name ?? nodeId;
  const process = await ManagedProcess.spawn({
    name,
    command: globalThis.process.execPath,
    args: [...(options.nodeArgs ?? []), options.bin ?? DATA_PLANE_BIN],
    env: full,
    cwd,
    echo: options.echo,
  });
  const adminUrl = `http://${full.CLAWGATE_DP_ADMIN_LISTEN}`;
  const proxyUrl = `http://${full.CLAWGATE_PROXY_LISTEN}`;
  const stop = async () => {
    await process.stop();
    if (ownsDir) await removeWorkDir(cwd);
  };
  const metrics = async () => {
    const response = await fetch(`${adminUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
    if (response.status !== 200) throw new Error(`${name} /metrics answered ${response.status}`);
    return response.text();
  };
  const waitUntil = options.waitUntil ?? "readyz";
  if (waitUntil !== "none") {
    try {
      await waitFor(
        async () => {
          process.assertRunning();
          return (await httpStatus(`${adminUrl}/${waitUntil}`)) === 200;
        },
        {
          what: `${name} ${adminUrl}/${waitUntil} to answer 200`,
          timeoutMs: options.readyTimeoutMs ?? 20_000,
        },
      );
    } catch (error) {
      await stop();
      throw withTail(error, process);
    }
  }
  return {
    process,
    env: full,
    nodeId,
    proxyUrl,
    adminUrl,
    metrics,
    snapshotVersion: async () => metricValue(await metrics(), "clawgate_snapshot_version"),
    configDump: async () => {
      const response = await fetch(`${adminUrl}/config_dump`, {
        signal: AbortSignal.timeout(5_000),
      });
      if (response.status !== 200)
        throw new Error(`${name} /config_dump answered ${response.status}`);
      return response.json();
    },
    readyStatus: () => httpStatus(`${adminUrl}/readyz`),
    stop,
    kill: async () => {
      await process.kill();
    },
  };
}
