import { spawn } from "node:child_process";
import { basename } from "node:path";
import { type ActionResult, tail } from "./action-result.js";

export interface RunCommandOptions {
  /** The command still running after this is killed and the result is a timeout. */
  timeoutMs: number;
  /** Extra environment for the command, on top of the control plane's minus CLAWGATE_*. */
  env?: Record<string, string>;
  /** Between SIGTERM and SIGKILL of a timed-out command; default 2 s. */
  killGraceMs?: number;
}

/** How much of stderr the journal keeps; the last lines say why a command failed. */
const STDERR_TAIL_CHARS = 500;
const STDERR_BUFFER_CHARS = 8_192;

/**
 * Runs `argv` without a shell (argv[0] is looked up in PATH, the rest go to execve as they
 * are) and resolves how it ended: exit 0 is ok. The command runs in its own process group, so
 * a timeout kills whatever it started too. Its environment drops CLAWGATE_* variables: the
 * admin token must not leak into a restart script.
 */
export function runCommand(
  argv: readonly string[],
  options: RunCommandOptions,
): Promise<ActionResult> {
  const [file, ...args] = argv;
  if (file === undefined) {
    return Promise.resolve({ outcome: "failed", evidence: "remediation command is empty" });
  }
  const name = basename(file);
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("CLAWGATE_")) env[key] = value;
  }
  Object.assign(env, options.env);

  return new Promise((resolve) => {
    let stderr = "";
    let timedOut = false;
    let settled = false;
    const finish = (result: ActionResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      resolve(result);
    };
    const child = spawn(file, args, {
      shell: false,
      detached: true,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    const killGroup = (signal: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    };
    let killTimer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup("SIGTERM");
      killTimer = setTimeout(() => killGroup("SIGKILL"), options.killGraceMs ?? 2_000);
    }, options.timeoutMs);
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_BUFFER_CHARS);
    });
    child.once("error", (error) => {
      finish({ outcome: "failed", evidence: `${name} could not start: ${error.message}` });
    });
    child.once("close", (code, signal) => {
      const said = tail(stderr, STDERR_TAIL_CHARS);
      const suffix = said === "" ? "" : `; stderr: ${said}`;
      if (timedOut) {
        finish({
          outcome: "timeout",
          evidence: `${name} still running after ${options.timeoutMs} ms, killed${suffix}`,
        });
      } else if (code === 0) {
        finish({ outcome: "ok", evidence: `${name} exited 0${suffix}` });
      } else {
        const how = signal !== null ? `was killed by ${signal}` : `exited ${code}`;
        finish({ outcome: "failed", evidence: `${name} ${how}${suffix}` });
      }
    });
  });
}
