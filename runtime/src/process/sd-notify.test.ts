import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createNotifier } from "./sd-notify.js";

const require = createRequire(import.meta.url);
const unix = require("unix-dgram") as {
  createSocket(
    type: "unix_dgram",
    listener: (buf: Buffer) => void,
  ): {
    bind(path: string): void;
    close(): void;
  };
};

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

function recordingLogger() {
  const lines: { level: string; obj: object; msg: string }[] = [];
  return {
    lines,
    error: (obj: object, msg: string) => lines.push({ level: "error", obj, msg }),
    warn: (obj: object, msg: string) => lines.push({ level: "warn", obj, msg }),
  };
}

/** A stand-in for systemd's notify socket: every datagram it receives, in order. */
async function notifySocket() {
  const dir = await mkdtemp(join(tmpdir(), "clawgate-notify-"));
  const path = join(dir, "notify.sock");
  const messages: string[] = [];
  let wake = () => {};
  const socket = unix.createSocket("unix_dgram", (buf) => {
    messages.push(buf.toString());
    wake();
  });
  socket.bind(path);
  cleanup.push(async () => {
    socket.close();
    await rm(dir, { recursive: true, force: true });
  });
  const received = (count: number) =>
    new Promise<string[]>((resolve) => {
      const check = () => {
        if (messages.length >= count) resolve(messages.slice());
      };
      wake = check;
      check();
    });
  return { path, messages, received };
}

describe("createNotifier", () => {
  it("sends READY once, STATUS on change, WATCHDOG and STOPPING as datagrams", async () => {
    const socket = await notifySocket();
    const notifier = createNotifier({
      env: { NOTIFY_SOCKET: socket.path },
      logger: recordingLogger(),
    });
    cleanup.push(() => notifier.close());
    expect(notifier.enabled).toBe(true);
    notifier.status("waiting for the control plane");
    notifier.status("waiting for the control plane"); // unchanged: not resent
    notifier.ready();
    notifier.ready(); // READY is a one-time event
    notifier.status("serving version 7\nwith a newline");
    notifier.watchdog();
    notifier.stopping();
    expect(await socket.received(5)).toEqual([
      "STATUS=waiting for the control plane",
      "READY=1",
      "STATUS=serving version 7 with a newline",
      "WATCHDOG=1",
      "STOPPING=1",
    ]);
  });

  it("is silent without NOTIFY_SOCKET", () => {
    const logger = recordingLogger();
    const notifier = createNotifier({
      env: {},
      logger,
      openSocket: () => {
        throw new Error("must not open a socket");
      },
    });
    notifier.ready();
    notifier.watchdog();
    expect(notifier.enabled).toBe(false);
    expect(logger.lines).toEqual([]);
  });

  it("logs one clear error and keeps going when the native module cannot load", () => {
    const logger = recordingLogger();
    const notifier = createNotifier({
      env: { NOTIFY_SOCKET: "/run/systemd/notify" },
      logger,
      openSocket: () => {
        throw new Error("Cannot find module 'unix_dgram.node'");
      },
    });
    expect(() => {
      notifier.ready();
      notifier.watchdog();
      notifier.stopping();
      notifier.close();
    }).not.toThrow();
    expect(notifier.enabled).toBe(false);
    expect(logger.lines).toHaveLength(1);
    expect(logger.lines[0]).toMatchObject({ level: "error" });
    expect(logger.lines[0]!.msg).toContain("cannot talk to systemd");
  });

  it("refuses an abstract socket with a clear error rather than sending into the void", () => {
    const logger = recordingLogger();
    const notifier = createNotifier({
      env: { NOTIFY_SOCKET: "@/org/freedesktop/systemd1/notify" },
      logger,
    });
    expect(notifier.enabled).toBe(false);
    expect(logger.lines[0]?.msg).toContain("abstract socket");
  });

  it("warns once when the socket is gone, without throwing", async () => {
    const logger = recordingLogger();
    const notifier = createNotifier({
      env: { NOTIFY_SOCKET: join(tmpdir(), "clawgate-no-such-notify.sock") },
      logger,
    });
    cleanup.push(() => notifier.close());
    notifier.watchdog();
    notifier.watchdog();
    expect(logger.lines.filter((line) => line.level === "warn")).toHaveLength(1);
  });
});
