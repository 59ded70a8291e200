import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** What `dp-apply.js` prints: one data plane's own event-loop blocks, nothing else on the cores. */
export interface DataPlaneAlone {
  readonly bootBlockMs: number;
  readonly fullWhileServingBlockMs: number;
  readonly evictionBlockMs: number;
  readonly changeBlockMs: { readonly p50: number; readonly max: number };
  readonly heapMiB: number;
}

/**
 * Runs `dp-apply.js` (the same sizes) in a process of its own, after the fleet is stopped: one
 * data plane and a stub control plane, blocks read with monitorEventLoopDelay at 1 ms. Beside
 * the fleet's rows, where each reading also holds the time eleven other processes had the two
 * cores, it gives the block the data plane itself causes.
 */
export async function measureDataPlaneAlone(
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<DataPlaneAlone> {
  const script = fileURLToPath(new URL("./dp-apply.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, ["--expose-gc", script], {
    env,
    timeout: timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  });
  const line = stdout
    .split("\n")
    .reverse()
    .find((text) => text.includes('"bootBlockMs"'));
  if (line === undefined) throw new Error("dp-apply.js printed no result line");
  return JSON.parse(line) as DataPlaneAlone;
}
