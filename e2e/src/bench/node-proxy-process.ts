import { fileURLToPath } from "node:url";
import { httpStatus } from "../support/http-probe.js";
import { ManagedProcess } from "../support/managed-process.js";
import { waitFor } from "../support/wait-for.js";

/**
 * Starts one of the bench's own Node proxies (a script next to this file, compiled to
 * e2e/dist/bench) in front of `origin`, and waits until it relays `/` with a 200.
 */
export async function startNodeProxy(
  script: "minimal-proxy" | "fastify-proxy",
  port: number,
  origin: string,
  /** Extra `node` flags after BENCH_NODE_FLAGS's, e.g. a preload. */
  nodeFlags: readonly string[] = [],
): Promise<ManagedProcess> {
  const file = fileURLToPath(new URL(`./${script}.js`, import.meta.url));
  const proxy = await ManagedProcess.spawn({
    name: script,
    command: process.execPath,
    args: [
      ...(process.env.BENCH_NODE_FLAGS?.split(" ").filter(Boolean) ?? []),
      ...nodeFlags,
      file,
      String(port),
      origin,
    ],
  });
  try {
    await waitFor(
      async () => {
        proxy.assertRunning();
        return (await httpStatus(`http://127.0.0.1:${port}/`)) === 200;
      },
      // Loading fastify and its plugins took over 10 s with the machine's load average at 30.
      { what: `${script} on 127.0.0.1:${port}`, timeoutMs: 60_000 },
    );
  } catch (error) {
    await proxy.stop();
    throw error;
  }
  return proxy;
}
