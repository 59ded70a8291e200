import { Backoff } from "@clawgate/runtime";
import type { Store } from "./store.js";

export interface WaitForEtcdOptions {
  endpoints: readonly string[];
  /** A key read to prove etcd answers; its absence is fine. */
  probeKey: string;
  /** Told after each failed attempt, before the wait: one line, no stack. */
  onUnreachable: (message: string) => void | Promise<void>;
  /** Waits between attempts; default full jitter from 200 ms, capped at 5 s. */
  backoff?: { next(): number };
}

/**
 * Reads from etcd until it answers. A control plane that starts before etcd (a reboot, a
 * cluster coming up) waits instead of exiting: exiting would only have systemd restart it
 * into the same wait, with a stack trace each time. Jittered so a fleet of replicas that lost
 * etcd together does not retry in lockstep.
 */
export async function waitForEtcd(store: Store, options: WaitForEtcdOptions): Promise<void> {
  const backoff = options.backoff ?? new Backoff({ baseMs: 200, maxMs: 5_000 });
  const where = options.endpoints.map(withoutCredentials).join(",");
  let lastReason = "no answer yet";
  while (true) {
    try {
      await store.get(options.probeKey);
      return;
    } catch (error) {
      // After a few failures the etcd client's own breaker refuses calls for a while without
      // trying; the last real failure says more than "circuit breaker is open".
      const paused = /circuit breaker is open/i.test(String((error as Error)?.message));
      const reason = paused ? `${lastReason} (client holding off)` : shortReason(error);
      if (!paused) lastReason = reason;
      await options.onUnreachable(`cannot reach etcd at ${where}: ${reason}`);
    }
    await new Promise((resolve) => setTimeout(resolve, backoff.next()));
  }
}

/** The gist of a gRPC error: the socket error code when there is one, else its first line. */
export function shortReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const socket = /\b(E[A-Z]{4,}[A-Z_]*)\b(?: ([0-9a-f.:[\]]+:\d+))?/.exec(message);
  if (socket !== null) return socket[2] === undefined ? socket[1]! : `${socket[1]} ${socket[2]}`;
  const first = (message.split("\n")[0] ?? "").trim();
  return first.length > 160 ? `${first.slice(0, 157)}...` : first;
}

/** An endpoint URL may carry user:password; never put that in a log line or /readyz. */
function withoutCredentials(endpoint: string): string {
  if (!URL.canParse(endpoint)) return endpoint;
  const url = new URL(endpoint);
  if (url.username === "" && url.password === "") return endpoint;
  url.username = "";
  url.password = "";
  return url.toString().replace(/\/$/, "");
}
