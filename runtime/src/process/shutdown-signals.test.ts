import { describe, expect, it } from "vitest";
import type { Notifier } from "./sd-notify.js";
import { onShutdownSignals } from "./shutdown-signals.js";

// A signal nobody else in the test process listens for; delivered with process.emit.
const SIGNAL = "SIGWINCH";

function recorder() {
  const events: string[] = [];
  const notifier: Notifier = {
    enabled: true,
    ready: () => events.push("READY=1"),
    status: (text) => events.push(`STATUS=${text}`),
    stopping: () => events.push("STOPPING=1"),
    watchdog: () => events.push("WATCHDOG=1"),
    close: () => events.push("close"),
  };
  const logger = {
    info: (_obj: object, msg: string) => events.push(`info: ${msg}`),
    warn: (_obj: object, msg: string) => events.push(`warn: ${msg}`),
    error: (_obj: object, msg: string) => events.push(`error: ${msg}`),
  };
  let exited = (_code: number) => {};
  const exit = new Promise<number>((resolve) => {
    exited = resolve;
  });
  return { events, notifier, logger, exit, onExit: (code: number) => exited(code) };
}

describe("onShutdownSignals", () => {
  it("sends STOPPING=1, runs the graceful stop and exits 0 when it is done", async () => {
    const r = recorder();
    let finishStop = () => {};
    const uninstall = onShutdownSignals({
      logger: r.logger,
      notifier: r.notifier,
      deadlineMs: 5_000,
      exit: r.onExit,
      signals: [SIGNAL],
      stop: () => {
        r.events.push("stop");
        return new Promise<void>((resolve) => {
          finishStop = resolve;
        });
      },
    });
    try {
      process.emit(SIGNAL, SIGNAL);
      expect(r.events).toEqual([
        "info: stopping: draining requests in flight",
        "STOPPING=1",
        "stop",
      ]);
      finishStop();
      expect(await r.exit).toBe(0);
      expect(r.events.slice(-2)).toEqual(["info: stopped", "close"]);
    } finally {
      uninstall();
    }
  });

  it("exits at once, with 0, on a second signal", async () => {
    const r = recorder();
    const uninstall = onShutdownSignals({
      logger: r.logger,
      notifier: r.notifier,
      deadlineMs: 5_000,
      exit: r.onExit,
      signals: [SIGNAL],
      stop: () => new Promise<void>(() => {}),
    });
    try {
      process.emit(SIGNAL, SIGNAL);
      process.emit(SIGNAL, SIGNAL);
      expect(await r.exit).toBe(0);
      expect(r.events).toContain("warn: second signal while stopping; exiting now");
    } finally {
      uninstall();
    }
  });

  it("lets a second signal skip the drain delay, and exits at once on a third", async () => {
    const r = recorder();
    let delays = 1;
    const exits: number[] = [];
    const uninstall = onShutdownSignals({
      logger: r.logger,
      notifier: r.notifier,
      deadlineMs: 5_000,
      exit: (code) => {
        exits.push(code);
        r.onExit(code);
      },
      signals: [SIGNAL],
      stop: () => new Promise<void>(() => {}),
      // One delay to skip: the first hurry ends it, the next finds nothing left to cut short.
      hurry: () => delays-- > 0,
    });
    try {
      process.emit(SIGNAL, SIGNAL);
      process.emit(SIGNAL, SIGNAL);
      expect(exits).toEqual([]);
      expect(r.events).toContain("warn: second signal while stopping; draining now");
      process.emit(SIGNAL, SIGNAL);
      expect(await r.exit).toBe(0);
      expect(exits).toEqual([0]);
      expect(r.events).toContain("warn: second signal while stopping; exiting now");
    } finally {
      uninstall();
    }
  });

  it("exits 0 at the deadline when the stop hangs", async () => {
    const r = recorder();
    const uninstall = onShutdownSignals({
      logger: r.logger,
      notifier: r.notifier,
      deadlineMs: 20,
      exit: r.onExit,
      signals: [SIGNAL],
      stop: () => new Promise<void>(() => {}),
    });
    try {
      process.emit(SIGNAL, SIGNAL);
      expect(await r.exit).toBe(0);
      expect(r.events).toContain("warn: graceful stop did not finish in time; exiting now");
    } finally {
      uninstall();
    }
  });
});
