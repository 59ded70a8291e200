import { spawn } from "node:child_process";
import { basename } from "node:path";
import { type ActionResult, tail } from "./action-result.js";
import { redactClawgateValues } from "./redact-output.js";

export interface RunCommandOptions {
  /** The command still running after this is killed and the result is a timeout. */
  timeoutMs: number;
  /** Extra environment for the command, on top of the control plane's minus CLAWGATE_*. */
  env?: Record<string, string>;
  /** Between SIGTERM and SIGKILL of a timed-out command; default 2 s. */
  killGraceMs?: number;
  /**
   * After the command exits, how long its stderr may still drain (a background child it left
   * may hold the pipe open for ever); default 50 ms: what the hook wrote before exiting is in
   * the pipe already, and the result should be journaled before the node it restarted is
   * readmitted (two probes later). Also how long after SIGKILL the result
   * waits for an exit that may never be reported.
   */
  drainGraceMs?: number;
  /** Aborting kills the command's group like a timeout does (leadership lost, stopping). */
  signal?: AbortSignal;
}

/** Between SIGTERM and SIGKILL of a timed-out command, unless the options say otherwise. */
export const DEFAULT_KILL_GRACE_MS = 2_000;

/** How much of stderr the journal keeps; the last lines say why a command failed. */
const STDERR_TAIL_CHARS = 500;
const STDERR_BUFFER_CHARS = 8_192;

/**
 * Runs `argv` without a shell (argv[0] is looked up in PATH, the rest go to execve as they
 * are) and resolves how it ended: exit 0 is ok. The result follows the command's own exit, not
 * the close of its stderr: a hook that starts a service in the background and exits 0 is done,
 * and that service keeps running. The command runs in its own process group, so a timeout kills
 * whatever it started too; a descendant that left the group (setsid) cannot hold the result up
 * beyond SIGKILL plus a grace. Its environment drops CLAWGATE_* variables: the admin token must
 * not leak into a restart script.
 */
export function runCommand(
  argv: readonly string[],
  options: RunCommandOptions,
): Promise<ActionResult> {
  const [file, ...args] = argv;
  if (file === undefined) {
    return Promise.resolve({ outcome: "failed", evidence: "remediation command is empty" });
  }
  if (options.signal?.aborted) {
    return Promise.resolve({ outcome: "failed", evidence: "aborted before it started" });
  }
  const name = basename(file);
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("CLAWGATE_")) env[key] = value;
  }
  Object.assign(env, options.env);
  const killGraceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  const drainGraceMs = options.drainGraceMs ?? 50;

  return new Promise((resolve) => {
    let stderr = "";
    let stopReason: string | undefined;
    let settled = false;
    const timers: NodeJS.Timeout[] = [];
    const later = (ms: number, fn: () => void) => {
      timers.push(setTimeout(fn, ms));
    };
    const child = spawn(file, args, {
      shell: false,
      detached: true,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    const finish = (result: ActionResult) => {
      if (settled) return;
      settled = true;
      for (const timer of timers) clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      // A background child may still hold the pipe: stop reading it, do not wait for it.
      child.stderr?.destroy();
      resolve(result);
    };
    const said = () => {
      const text = tail(redactClawgateValues(stderr), STDERR_TAIL_CHARS);
      return text === "" ? "" : `; stderr: ${text}`;
    };
    const killGroup = (signal: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    };
    /** Timeout or abort: TERM, then KILL, then settle even if no exit is ever reported. */
    const stop = (reason: string) => {
      if (stopReason !== undefined || settled) return;
      stopReason = reason;
      killGroup("SIGTERM");
      later(killGraceMs, () => {
        killGroup("SIGKILL");
        later(drainGraceMs, () =>
          finish({ outcome: outcomeOf(reason), evidence: `${name} ${reason}, killed${said()}` }),
        );
      });
    };
    const onAbort = () => stop("aborted (leadership lost or stopping)");
    options.signal?.addEventListener("abort", onAbort, { once: true });
    later(options.timeoutMs, () => stop(`still running after ${options.timeoutMs} ms`));

    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_BUFFER_CHARS);
    });
    child.once("error", (error) => {
      finish({ outcome: "failed", evidence: `${name} could not start: ${error.message}` });
    });
    child.once("exit", (code, signal) => {
      const result = (): ActionResult => {
        if (stopReason !== undefined) {
          return {
            outcome: outcomeOf(stopReason),
            evidence: `${name} ${stopReason}, killed${said()}`,
          };
        }
        if (code === 0) return { outcome: "ok", evidence: `${name} exited 0${said()}` };
        const how = signal !== null ? `was killed by ${signal}` : `exited ${code}`;
        return { outcome: "failed", evidence: `${name} ${how}${said()}` };
      };
      // stderr's last words may still be in the pipe: settle when it closes, or after a grace.
      if (child.stderr === null || child.stderr.readableEnded) {
        finish(result());
        return;
      }
      child.stderr.once("close", () => finish(result()));
      later(drainGraceMs, () => finish(result()));
    });
  });
}

function outcomeOf(stopReason: string): ActionResult["outcome"] {
  return stopReason.startsWith("aborted") ? "failed" : "timeout";
}
