import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface StartEtcdOptions {
  /** etcd executable; default /usr/bin/etcd when present, else `etcd` from PATH. */
  binary?: string;
  /** How long to wait for etcd to report healthy; default 20000 ms. */
  startTimeoutMs?: number;
  /** Client port to listen on, for a test that points a control plane at it first; default a free one. */
  clientPort?: number;
}

export interface EtcdProcess {
  /** Client URL, for example http://127.0.0.1:41234. */
  endpoint: string;
  pid: number;
  /** Stops etcd (SIGTERM, then SIGKILL after 5 s) and removes its data dir; safe to call twice. */
  stop(): Promise<void>;
}

const STDERR_TAIL_BYTES = 8192;
const KILL_GRACE_MS = 5000;
// Free ports are found by binding and closing, so another process can grab one before etcd
// binds it; a few attempts make that race harmless.
const START_ATTEMPTS = 3;

/**
 * Starts a throwaway single-member etcd on loopback for tests: free ports, a temp data dir,
 * raft timings cut to 10 ms heartbeats / 100 ms elections so it elects itself at once.
 */
export async function startEtcd(options: StartEtcdOptions = {}): Promise<EtcdProcess> {
  let lastError: Error | undefined;
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    try {
      return await startOnce(options);
    } catch (error) {
      lastError = error as Error;
      if (!/address already in use/i.test(lastError.message)) throw lastError;
    }
  }
  throw lastError as Error;
}

async function startOnce(options: StartEtcdOptions): Promise<EtcdProcess> {
  const binary = options.binary ?? (existsSync("/usr/bin/etcd") ? "/usr/bin/etcd" : "etcd");
  const deadline = Date.now() + (options.startTimeoutMs ?? 20_000);
  const dataDir = await mkdtemp(join(tmpdir(), "clawgate-etcd-"));
  const clientPort = options.clientPort ?? (await freePort());
  let peerPort = await freePort();
  while (peerPort === clientPort) peerPort = await freePort();
  const clientUrl = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const name = `clawgate-test-${clientPort}`;

  const child = spawn(
    binary,
    [
      `--name=${name}`,
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${clientUrl}`,
      `--advertise-client-urls=${clientUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=${name}=${peerUrl}`,
      "--initial-cluster-state=new",
      "--heartbeat-interval=10",
      "--election-timeout=100",
      "--logger=zap",
      "--log-outputs=stderr",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );

  let stderrTail = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderrTail = (stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
  });
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let spawnError: Error | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      exit = { code, signal };
      resolve();
    });
    child.once("error", (error) => {
      spawnError = error;
      resolve();
    });
  });

  // If the test process dies without calling stop(), etcd must not outlive it.
  const killOnExit = () => {
    if (child.pid !== undefined && exit === undefined) child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      await terminate(child, exited, () => exit !== undefined || spawnError !== undefined);
      process.removeListener("exit", killOnExit);
      await rm(dataDir, { recursive: true, force: true });
    })();
    return stopped;
  };

  const failure = (reason: string): Error =>
    new Error(
      `etcd (${binary}) did not start on ${clientUrl}: ${reason}\n--- etcd stderr (tail) ---\n${stderrTail.trim() || "(empty)"}`,
    );

  while (true) {
    if (spawnError !== undefined) {
      await stop();
      throw failure(`spawn failed: ${spawnError.message}`);
    }
    if (exit !== undefined) {
      const how = exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code}`;
      await stop();
      throw failure(`process exited early with ${how}`);
    }
    if (await isHealthy(clientUrl)) break;
    if (Date.now() > deadline) {
      await stop();
      throw failure(`not healthy within ${options.startTimeoutMs ?? 20_000} ms`);
    }
    // Wait for whichever comes first: a short poll interval or the process exiting.
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 50))]);
  }

  return { endpoint: clientUrl, pid: child.pid as number, stop };
}

async function terminate(
  child: ChildProcess,
  exited: Promise<void>,
  isGone: () => boolean,
): Promise<void> {
  if (isGone() || child.pid === undefined) return;
  child.kill("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(true), KILL_GRACE_MS);
  });
  const timedOut = await Promise.race([exited.then(() => false), graceOver]);
  clearTimeout(timer);
  if (timedOut && !isGone()) {
    child.kill("SIGKILL");
    await exited;
  }
}

async function isHealthy(clientUrl: string): Promise<boolean> {
  try {
    const response = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(1000) });
    if (!response.ok) return false;
    const body = (await response.json()) as { health?: unknown };
    return body.health === "true";
  } catch {
    return false;
  }
}

/** A loopback port that was free a moment ago. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("no free port"))));
    });
  });
}
