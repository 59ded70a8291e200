import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { AdminClient } from "./admin-client.js";
import { freePorts } from "./free-port.js";
import { httpStatus, splitHostPort, tcpReachable } from "./http-probe.js";
import { ManagedProcess, withTail } from "./managed-process.js";
import { CONTROL_PLANE_BIN } from "./paths.js";
import { waitFor } from "./wait-for.js";
import { makeWorkDir, removeWorkDir } from "./work-dir.js";

export interface StartControlPlaneOptions {
  /** Name in error messages; default "control-plane". */
  name?: string;
  /** Working directory; default a new temp dir, removed by stop(). */
  cwd?: string;
  /** How long to wait for the admin API and gRPC port; default 20 s. */
  readyTimeoutMs?: number;
  /** Echo the process's output to stderr; default when E2E_VERBOSE is set. */
  echo?: boolean;
  /** Node options before the script (`--cpu-prof`, which NODE_OPTIONS refuses); default none. */
  nodeArgs?: string[];
  /**
   * Wait until the admin API and the gRPC port serve (default), or only until /healthz answers
   * (false), for a control plane expected to wait for its store before serving.
   */
  untilServing?: boolean;
}

export interface ControlPlane {
  process: ManagedProcess;
  /** The complete environment it was started with: pass it again to restart it in place. */
  env: Record<string, string>;
  adminUrl: string;
  /** host:port of the gRPC snapshot service, as data planes' CLAWGATE_CP_ADDRESSES. */
  grpcAddress: string;
  token: string;
  admin: AdminClient;
  /** SIGTERM, SIGKILL after 5 s; removes the temp dir it created. */
  stop(): Promise<void>;
  /** kill -9. */
  kill(): Promise<void>;
}

/**
 * Starts clawgate-control-plane with `env` on top of test defaults: free loopback ports, a
 * random admin token (unless `env` names only a CLAWGATE_ADMIN_TOKEN_FILE), the embedded store in its work dir unless CLAWGATE_ETCD_ENDPOINTS is
 * given. Resolves once the admin API answers and the gRPC port accepts connections.
 */
export async function startControlPlane(
  env: Record<string, string> = {},
  options: StartControlPlaneOptions = {},
): Promise<ControlPlane> {
  const name = options.name ?? "control-plane";
  const ownsDir = options.cwd === undefined;
  const cwd = options.cwd ?? (await makeWorkDir("cp"));
  const [adminPort, grpcPort] = await freePorts(2);
  // A token file and no token: the control plane reads or generates it, as it does for users.
  const tokenFile =
    env.CLAWGATE_ADMIN_TOKEN === undefined ? env.CLAWGATE_ADMIN_TOKEN_FILE : undefined;
  const full: Record<string, string> = {
    CLAWGATE_ADMIN_LISTEN: `127.0.0.1:${adminPort}`,
    CLAWGATE_GRPC_LISTEN: `127.0.0.1:${grpcPort}`,
    ...(tokenFile === undefined ? { CLAWGATE_ADMIN_TOKEN: randomBytes(16).toString("hex") } : {}),
    CLAWGATE_STORE_PATH: join(cwd, "store.json"),
    CLAWGATE_LOG_LEVEL: "info",
    ...env,
  };
  const process = await ManagedProcess.spawn({
    name,
    command: globalThis.process.execPath,
    args: [...(options.nodeArgs ?? []), CONTROL_PLANE_BIN],
    env: full,
    cwd,
    echo: options.echo,
  });
  const adminUrl = `http://${full.CLAWGATE_ADMIN_LISTEN}`;
  let admin = new AdminClient(adminUrl, full.CLAWGATE_ADMIN_TOKEN ?? "");
  const grpc = splitHostPort(full.CLAWGATE_GRPC_LISTEN!);
  const stop = async () => {
    await process.stop();
    if (ownsDir) await removeWorkDir(cwd);
  };
  try {
    await waitFor(
      async () => {
        process.assertRunning();
        if (options.untilServing === false)
          return (await httpStatus(`${adminUrl}/healthz`)) === 200;
        return (await adminReady(admin)) && (await tcpReachable(grpc.host, grpc.port));
      },
      {
        what:
          options.untilServing === false
            ? `${name} /healthz at ${adminUrl}`
            : `${name} admin API at ${adminUrl} and gRPC at ${full.CLAWGATE_GRPC_LISTEN}`,
        timeoutMs: options.readyTimeoutMs ?? 20_000,
      },
    );
    // Written before the admin API listens, so it is there once the API answered.
    if (tokenFile !== undefined) {
      admin = new AdminClient(adminUrl, (await readFile(resolve(cwd, tokenFile), "utf8")).trim());
    }
  } catch (error) {
    await stop();
    throw withTail(error, process);
  }
  return {
    process,
    env: full,
    adminUrl,
    grpcAddress: full.CLAWGATE_GRPC_LISTEN!,
    token: admin.token,
    admin,
    stop,
    kill: async () => {
      await process.kill();
    },
  };
}

/** /healthz answering 200 is the CP's own liveness signal; without one, the API answering is. */
async function adminReady(admin: AdminClient): Promise<boolean> {
  const status = await httpStatus(`${admin.baseUrl}/healthz`);
  if (status === 200) return true;
  if (status !== 404) return false;
  return (await admin.request("GET", "/v1/snapshot")).status === 200;
}
