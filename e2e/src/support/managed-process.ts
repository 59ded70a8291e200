import { type ChildProcess, spawn } from "node:child_process";
import { LogTail } from "./log-tail.js";
import { StopWaiting } from "./wait-for.js";

export interface SpawnOptions {
  /** Name used in error messages and, when echoing, as the line prefix. */
  name: string;
  command: string;
  args: string[];
  /** Added to a copy of this process's environment with every CLAWGATE_* variable removed. */
  env?: Record<string, string | undefined>;
  /** Working directory; default this process's. */
  cwd?: string;
  /** Also write the child's output to this process's stderr; default when E2E_VERBOSE is set. */
  echo?: boolean;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * A child process started by us and stopped by its PID. Output is kept as a tail so a failing
 * test can say what the process logged.
 */
export class ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly output = new LogTail();
  /** Resolves when the process has exited, however that happened. */
  readonly exited: Promise<ExitStatus>;
  private status: ExitStatus | undefined;

  private constructor(options: SpawnOptions, child: ChildProcess) {
    this.name = options.name;
    if (child.pid === undefined) throw new Error(`${options.name}: spawn gave no pid`);
    this.pid = child.pid;
    const echo = options.echo ?? process.env.E2E_VERBOSE !== undefined;
    const collect = (chunk: Buffer) => {
      const text = chunk.toString("utf8");
      this.output.push(text);
      if (echo) process.stderr.write(prefixLines(options.name, text));
    };
    child.stdout?.on("data", collect);
    child.stderr?.on("data", collect);
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.status = { code, signal };
        resolve(this.status);
      });
    });
  }

  static async spawn(options: SpawnOptions): Promise<ManagedProcess> {
    const env: Record<string, string | undefined> = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (!key.startsWith("CLAWGATE_")) env[key] = value;
    }
    Object.assign(env, options.env);
    const child = spawn(options.command, options.args, {
      cwd: options.cwd,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", (error) =>
        reject(new Error(`${options.name}: cannot start ${options.command}: ${error.message}`)),
      );
    });
    return new ManagedProcess(options, child);
  }

  get running(): boolean {
    return this.status === undefined;
  }

  get exitStatus(): ExitStatus | undefined {
    return this.status;
  }

  /** Throws StopWaiting when the process has exited: use inside waitFor conditions. */
  assertRunning(): void {
    if (this.status !== undefined) {
      throw new StopWaiting(`${this.name} exited (${describeExit(this.status)})\n${this.tail()}`);
    }
  }

  /** The last lines the process wrote, framed for an error message. */
  tail(lines = 40): string {
    return `--- last output of ${this.name} (pid ${this.pid}) ---\n${this.output.text(lines)}\n---`;
  }

  /**
   * SIGTERM, then SIGKILL if it has not exited within `graceMs` (default 5 s). Resolves with
   * how it exited.
   */
  async stop(graceMs = 5_000): Promise<ExitStatus> {
    if (this.status !== undefined) return this.status;
    this.signal("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), graceMs);
    });
    const first = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (first !== "timeout") return first;
    return this.kill();
  }

  /** SIGKILL (kill -9) and wait for the exit. */
  async kill(): Promise<ExitStatus> {
    if (this.status !== undefined) return this.status;
    this.signal("SIGKILL");
    return this.exited;
  }

  private signal(signal: NodeJS.Signals): void {
    try {
      process.kill(this.pid, signal);
    } catch (error) {
      // ESRCH: it exited between our check and the signal; the exit event is on its way.
      if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
    }
  }
}

/** `error` with the process's output tail appended, unless it already carries it. */
export function withTail(error: unknown, process: ManagedProcess): Error {
  const message = error instanceof Error ? error.message : String(error);
  return message.includes("--- last output of")
    ? new Error(message)
    : new Error(`${message}\n${process.tail()}`);
}

export function describeExit(status: ExitStatus): string {
  return status.signal !== null ? `signal ${status.signal}` : `code ${status.code}`;
}

function prefixLines(name: string, text: string): string {
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => `[${name}] ${line}\n`)
    .join("");
}
