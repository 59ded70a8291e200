import { mkdir } from "node:fs/promises";
import { relative, resolve } from "node:path";
import { type ControlPlane, startControlPlane } from "../support/control-plane-process.js";
import { waitForConvergence } from "../support/convergence.js";
import { type DataPlane, startDataPlane } from "../support/data-plane-process.js";
import { splitHostPort, tcpReachable } from "../support/http-probe.js";
import { describeExit } from "../support/managed-process.js";
import { startNamedUpstream } from "../support/named-upstream.js";
import { whoAnswered } from "../support/proxy-client.js";
import { Teardown } from "../support/teardown.js";

/**
 * `npm run dev`: a whole Clawgate on this machine in one command. Control plane on the embedded
 * store, one data plane, two demo upstreams, an example config; up until Ctrl-C.
 *
 * Environment (defaults in brackets):
 *   CLAWGATE_DEV_PROXY_LISTEN     data plane proxy [127.0.0.1:8080]
 *   CLAWGATE_DEV_DP_ADMIN_LISTEN  data plane admin [127.0.0.1:9901]
 *   CLAWGATE_DEV_ADMIN_LISTEN     control plane admin API [127.0.0.1:9180]
 *   CLAWGATE_DEV_GRPC_LISTEN      control plane gRPC [127.0.0.1:9190]
 *   CLAWGATE_DEV_DEMO_PORTS       the two demo upstreams [9001,9002]
 *   CLAWGATE_DEV_DIR              store and cache [./.clawgate/dev]
 *   CLAWGATE_ADMIN_TOKEN          admin token [none: the token file's]
 *   CLAWGATE_ADMIN_TOKEN_FILE     token file, generated (mode 0600) when missing, kept otherwise
 *                                 [./.clawgate/admin-token, where clawctl looks by default]
 *   CLAWGATE_DEV_VERBOSE          set to echo the processes' logs
 */
const settings = {
  proxyListen: process.env.CLAWGATE_DEV_PROXY_LISTEN ?? "127.0.0.1:8080",
  dpAdminListen: process.env.CLAWGATE_DEV_DP_ADMIN_LISTEN ?? "127.0.0.1:9901",
  adminListen: process.env.CLAWGATE_DEV_ADMIN_LISTEN ?? "127.0.0.1:9180",
  grpcListen: process.env.CLAWGATE_DEV_GRPC_LISTEN ?? "127.0.0.1:9190",
  demoPorts: (process.env.CLAWGATE_DEV_DEMO_PORTS ?? "9001,9002").split(",").map(Number),
  dir: resolve(process.env.CLAWGATE_DEV_DIR ?? ".clawgate/dev"),
  token: process.env.CLAWGATE_ADMIN_TOKEN,
  // The file clawctl reads when run from this directory with no token given, so the README's
  // next step (`npx clawctl get routes`) works as it is.
  tokenFile: resolve(process.env.CLAWGATE_ADMIN_TOKEN_FILE ?? ".clawgate/admin-token"),
  echo: process.env.CLAWGATE_DEV_VERBOSE !== undefined,
};

async function main(): Promise<void> {
  const teardown = new Teardown();
  let stopping = false;
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log("stopping");
    await teardown.run().catch((error: unknown) => log(String(error)));
    process.exit(code);
  };
  process.once("SIGINT", () => void shutdown(0));
  process.once("SIGTERM", () => void shutdown(0));

  try {
    await refuseBusyPorts();
    await mkdir(settings.dir, { recursive: true });

    const demo = [];
    for (const [i, port] of settings.demoPorts.entries()) {
      const upstream = await startNamedUpstream(`demo-${i + 1}`, { port });
      teardown.add(upstream.name, () => upstream.close());
      demo.push(upstream);
    }

    const cp: ControlPlane = await startControlPlane(
      {
        CLAWGATE_ADMIN_LISTEN: settings.adminListen,
        CLAWGATE_GRPC_LISTEN: settings.grpcListen,
        ...(settings.token === undefined
          ? { CLAWGATE_ADMIN_TOKEN_FILE: settings.tokenFile }
          : { CLAWGATE_ADMIN_TOKEN: settings.token }),
        CLAWGATE_STORE_PATH: resolve(settings.dir, "store.json"),
      },
      { cwd: settings.dir, echo: settings.echo },
    );
    teardown.add("control plane", () => cp.stop());
    await cp.admin.apply([
      {
        kind: "upstream",
        name: "demo",
        spec: {
          nodes: demo.map((upstream, i) => ({
            address: upstream.address,
            weight: i === 0 ? 3 : 1,
          })),
        },
      },
      { kind: "route", name: "demo", spec: { match: { pathPrefix: "/demo" }, upstream: "demo" } },
    ]);

    const dp: DataPlane = await startDataPlane(
      {
        CLAWGATE_PROXY_LISTEN: settings.proxyListen,
        CLAWGATE_DP_ADMIN_LISTEN: settings.dpAdminListen,
        CLAWGATE_CP_ADDRESSES: settings.grpcListen,
        CLAWGATE_NODE_ID: "dev",
        CLAWGATE_CACHE_DIR: resolve(settings.dir, "cache"),
      },
      { cwd: settings.dir, echo: settings.echo },
    );
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp]);
    await whoAnswered(`${dp.proxyUrl}/demo/hello`);

    // A child that dies takes the gateway down with it, loudly, instead of leaving half of it.
    for (const child of [cp.process, dp.process]) {
      void child.exited.then((status) => {
        if (stopping) return;
        log(`${child.name} exited (${describeExit(status)})\n${child.tail()}`);
        void shutdown(1);
      });
    }

    // Where the token is, never the token: this output ends up in terminals and CI logs.
    const shown = relative(process.cwd(), settings.tokenFile);
    const tokenFile = shown.startsWith("..") ? settings.tokenFile : shown;
    const tokenWhere =
      settings.token === undefined
        ? `in ${tokenFile} (mode 0600), where clawctl run from here looks`
        : "from CLAWGATE_ADMIN_TOKEN (export it for clawctl too)";
    const tokenShell =
      settings.token === undefined ? `$(cat ${tokenFile})` : "$CLAWGATE_ADMIN_TOKEN";
    // clawctl's default admin URL is the dev default; a moved port needs saying.
    const clawctl =
      cp.adminUrl === "http://127.0.0.1:9180"
        ? "npx clawctl"
        : `CLAWGATE_ADMIN_URL=${cp.adminUrl} npx clawctl`;
    process.stdout.write(`
Clawgate is running (Ctrl-C stops it).

  try it:     curl ${dp.proxyUrl}/demo/hello
              (upstream "demo": ${demo.map((u, i) => `${u.name} at ${u.address} weight ${i === 0 ? 3 : 1}`).join(", ")})
  admin API:  ${cp.adminUrl}   docs: ${cp.adminUrl}/docs
  token:      ${tokenWhere}
              ${clawctl} get routes
              curl -H "authorization: Bearer ${tokenShell}" ${cp.adminUrl}/v1/dataplanes
  data plane: ${dp.adminUrl}/metrics  ${dp.adminUrl}/config_dump
  state:      ${settings.dir}
`);
  } catch (error) {
    log(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
    await shutdown(1);
  }
}

/** A port already taken would let us talk to someone else's process and call it ready. */
async function refuseBusyPorts(): Promise<void> {
  const addresses = [
    settings.proxyListen,
    settings.dpAdminListen,
    settings.adminListen,
    settings.grpcListen,
    ...settings.demoPorts.map((port) => `127.0.0.1:${port}`),
  ];
  for (const address of addresses) {
    const { host, port } = splitHostPort(address);
    if (await tcpReachable(host === "0.0.0.0" ? "127.0.0.1" : host, port, 300)) {
      throw new Error(`${address} is already in use; set the CLAWGATE_DEV_* variables to move it`);
    }
  }
}

function log(message: string): void {
  process.stderr.write(`clawgate dev: ${message}\n`);
}

void main();
