import { fileURLToPath } from "node:url";
import { ManagedProcess, waitFor } from "../support/index.js";

const SCRIPT = fileURLToPath(new URL("./upstream-process.mjs", import.meta.url));

export interface UpstreamProcess {
  process: ManagedProcess;
  /** host:port, as an upstream node address. */
  address: string;
}

/** Starts upstream-process.mjs as a child process and resolves once it listens. */
export async function spawnUpstream(name: string): Promise<UpstreamProcess> {
  const process = await ManagedProcess.spawn({
    name: `upstream ${name}`,
    command: globalThis.process.execPath,
    args: [SCRIPT],
    env: { UPSTREAM_NAME: name, UPSTREAM_PORT: "0" },
  });
  const port = await waitFor(
    () => {
      process.assertRunning();
      const line = process.output.text(5).match(/\{"port":(\d+)\}/);
      return line === null ? false : Number(line[1]);
    },
    { what: `upstream ${name} to listen` },
  );
  return { process, address: `127.0.0.1:${port}` };
}
