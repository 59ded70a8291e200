import { execFile } from "node:child_process";
import { CLAWCTL_BIN } from "./paths.js";

export interface ClawctlRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built clawctl once and waits for it, bounded (execFile kills it by its PID after
 * `timeoutMs`). stdout and stderr are kept apart: `dump` and `token create` print what a script
 * captures on stdout and talk to the user on stderr. The environment is only what is given
 * (plus PATH), so no CLAWGATE_* variable of the test runner leaks in.
 */
export function runClawctl(
  args: readonly string[],
  env: Record<string, string>,
  options: { cwd?: string; timeoutMs?: number } = {},
): Promise<ClawctlRun> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CLAWCTL_BIN, ...args],
      {
        env: { PATH: process.env.PATH ?? "", ...env },
        cwd: options.cwd,
        timeout: options.timeoutMs ?? 20_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== "number") {
          reject(
            new Error(`clawctl ${args.join(" ")} did not finish: ${error.message}\n${stderr}`),
          );
          return;
        }
        resolve({ code: error === null ? 0 : (error.code as number), stdout, stderr });
      },
    );
  });
}
