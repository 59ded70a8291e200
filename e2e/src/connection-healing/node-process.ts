import { ManagedProcess, REPO_ROOT, waitFor } from "../support/index.js";

/**
 * The upstream the request-healing tests kill with SIGKILL; the same one serves here. Named
 * from the repository root, since tsc does not copy .mjs files: compiled scripts (npm run
 * screenshots) find it in src/ too.
 */
export const UPSTREAM_SCRIPT = `${REPO_ROOT}e2e/src/request-healing/upstream-process.mjs`;

export interface NodeProcess {
  name: string;
  process: ManagedProcess;
  port: number;
  /** 127.0.0.1:port, as an upstream node address. */
  address: string;
}

/**
 * Starts an upstream node as its own process (so it can die by kill -9) and resolves once it
 * listens. `port` 0 takes any free port; a given port brings a killed node back on its address.
 */
export async function spawnNode(name: string, port = 0): Promise<NodeProcess> {
  const process = await ManagedProcess.spawn({
    name: `node ${name}`,
    command: globalThis.process.execPath,
    args: [UPSTREAM_SCRIPT],
    env: { UPSTREAM_NAME: name, UPSTREAM_PORT: String(port) },
  });
  const bound = await waitFor(
    () => {
      process.assertRunning();
      const line = process.output.text(5).match(/\{"port":(\d+)\}/);
      return line === null ? false : Number(line[1]);
    },
    { what: `node ${name} to listen` },
  );
  return { name, process, port: bound, address: `127.0.0.1:${bound}` };
}
