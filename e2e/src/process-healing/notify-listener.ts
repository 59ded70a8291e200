import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

interface UnixDgramServer {
  bind(path: string): void;
  on(event: "error", listener: (err: Error) => void): unknown;
  close(): void;
}

const require = createRequire(import.meta.url);
const unix = require("unix-dgram") as {
  createSocket(type: "unix_dgram", listener: (buf: Buffer) => void): UnixDgramServer;
};

/** One sd_notify datagram and when it arrived (performance.now()). */
export interface NotifyMessage {
  text: string;
  at: number;
}

export interface NotifyListener {
  /** Give this to the process as NOTIFY_SOCKET. */
  path: string;
  readonly messages: readonly NotifyMessage[];
  /** Resolves with the first message (from index `from` on) that matches. */
  next(
    match: (text: string) => boolean,
    options?: { from?: number; timeoutMs?: number },
  ): Promise<NotifyMessage>;
  /** Messages equal to `text` that arrived in [from, to]. */
  count(text: string, from: number, to: number): number;
  close(): Promise<void>;
}

/**
 * What systemd is on the other end of NOTIFY_SOCKET: a unix datagram socket in a temp dir that
 * records every message, so a test can check what a real process told its service manager.
 */
export async function startNotifyListener(): Promise<NotifyListener> {
  const dir = await mkdtemp(join(tmpdir(), "clawgate-notify-"));
  const path = join(dir, "notify.sock");
  const messages: NotifyMessage[] = [];
  const waiters = new Set<() => void>();
  const socket = unix.createSocket("unix_dgram", (buf) => {
    // One datagram may carry several newline-separated assignments.
    const at = performance.now();
    for (const text of buf.toString("utf8").split("\n")) {
      if (text !== "") messages.push({ text, at });
    }
    for (const wake of [...waiters]) wake();
  });
  socket.on("error", () => {});
  socket.bind(path);
  return {
    path,
    messages,
    next(match, options = {}) {
      const from = options.from ?? 0;
      const timeoutMs = options.timeoutMs ?? 20_000;
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = messages.slice(from).find((message) => match(message.text));
          if (found === undefined) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `no matching sd_notify message within ${timeoutMs} ms; got ${JSON.stringify(messages.slice(from).map((m) => m.text))}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    count(text, from, to) {
      return messages.filter((m) => m.text === text && m.at >= from && m.at <= to).length;
    },
    async close() {
      socket.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
