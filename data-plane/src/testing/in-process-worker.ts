import { vi } from "vitest";
import type { DataPlaneConfig } from "../config/config-schema.js";
import { runProxyWorker } from "../workers/proxy-worker.js";
import { type FromWorker, isFromWorker, type ToWorker } from "../workers/worker-messages.js";

/** A proxy worker run in the test's own process, the test playing its primary. */
export interface InProcessWorker {
  /** Delivers a message the way the cluster channel does. */
  send(message: ToWorker): void;
  /** The next message of `type` the worker sends from now on. */
  reply<T extends FromWorker["type"]>(type: T): Promise<Extract<FromWorker, { type: T }>>;
  /** Sends stop, waits for the worker to drain and call process.exit, then restores process. */
  stop(): Promise<void>;
}

/**
 * Runs runProxyWorker here, so a test can count what the worker's own code calls. The
 * listeners it adds to `process` are kept from it (none of them would stop a test runner that
 * shares the process), its clawgate messages to the primary are taken from process.send (the
 * runner's own messages still pass), and its process.exit at stop only resolves stop().
 */
export async function startInProcessWorker(config: DataPlaneConfig): Promise<InProcessWorker> {
  const listeners = new Map<string, (message: unknown) => void>();
  const on = vi.spyOn(process, "on").mockImplementation(((event: string, listener: never) => {
    listeners.set(event, listener);
    return process;
  }) as typeof process.on);
  const waiting: { type: string; resolve: (message: FromWorker) => void }[] = [];
  const originalSend = process.send;
  const passOn = originalSend as ((...args: unknown[]) => boolean) | undefined;
  process.send = ((message: unknown, ...rest: unknown[]) => {
    if (!isFromWorker(message)) return passOn?.call(process, message, ...rest) ?? false;
    const index = waiting.findIndex((w) => w.type === message.type);
    if (index >= 0) waiting.splice(index, 1)[0]!.resolve(message);
    return true;
  }) as typeof process.send;
  let exited!: () => void;
  const exit = new Promise<void>((resolve) => {
    exited = resolve;
  });
  const exitSpy = vi.spyOn(process, "exit").mockImplementation((() => exited()) as never);
  const reply = <T extends FromWorker["type"]>(type: T) =>
    new Promise<Extract<FromWorker, { type: T }>>((resolve) =>
      waiting.push({ type, resolve: resolve as (message: FromWorker) => void }),
    );
  const hello = reply("clawgate:hello");
  try {
    // Synchronous up to its hello: every listener is added by the time it returns.
    await runProxyWorker(config);
  } finally {
    on.mockRestore();
  }
  await hello;
  const deliver = listeners.get("message")!;
  return {
    send: (message) => deliver(message),
    reply,
    stop: async () => {
      deliver({ type: "clawgate:stop", drainTimeoutMs: 0 });
      await exit;
      exitSpy.mockRestore();
      process.send = originalSend;
    },
  };
}
