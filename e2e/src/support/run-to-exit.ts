import { readdir } from "node:fs/promises";
import { ManagedProcess } from "./managed-process.js";
import type { Teardown } from "./teardown.js";
import { waitFor } from "./wait-for.js";
import { makeWorkDir, removeWorkDir } from "./work-dir.js";

export interface RunResult {
  code: number | null;
  /** Everything it wrote to stdout and stderr (up to 200 lines). */
  output: string;
  /** What it left in its working directory, which starts empty. */
  files: string[];
}

/**
 * Runs a built binary (a .js file) with node in an empty directory of its own and waits,
 * bounded, for it to exit. One that starts serving instead never exits: the wait fails and
 * `teardown` stops it by its PID. Listeners default to free loopback ports so such a binary
 * cannot collide with anything.
 */
export async function runToExit(
  teardown: Teardown,
  bin: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<RunResult> {
  const cwd = await makeWorkDir("binary");
  teardown.add(`work dir ${cwd}`, () => removeWorkDir(cwd));
  const child = await ManagedProcess.spawn({
    name: bin.slice(bin.lastIndexOf("/") + 1),
    command: process.execPath,
    args: [bin, ...args],
    cwd,
    env: {
      CLAWGATE_ADMIN_LISTEN: "127.0.0.1:0",
      CLAWGATE_GRPC_LISTEN: "127.0.0.1:0",
      CLAWGATE_PROXY_LISTEN: "127.0.0.1:0",
      CLAWGATE_DP_ADMIN_LISTEN: "127.0.0.1:0",
      ...env,
    },
  });
  teardown.add(child.name, () => child.stop());
  const status = await waitFor(() => child.exitStatus, {
    what: `${child.name} ${args.join(" ")} to exit`,
    timeoutMs: 20_000,
  });
  return { code: status.code, output: child.output.text(200), files: await readdir(cwd) };
}
