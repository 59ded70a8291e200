import { describe, expect, it } from "vitest";
import { type WorkerInboxParts, workerInbox } from "./worker-inbox.js";
import type { FromWorker, ToWorker } from "./worker-messages.js";

/** An inbox whose handle() throws for the message types in `throwing`, recording everything. */
function inbox(overrides: Partial<WorkerInboxParts> = {}, throwing: ToWorker["type"][] = []) {
  const sent: FromWorker[] = [];
  const handled: ToWorker["type"][] = [];
  const errors: string[] = [];
  const failedStarts: unknown[] = [];
  const receive = workerInbox({
    send: (message) => sent.push(message),
    coordinate: () => false,
    metrics: async () => [],
    handle: async (message) => {
      if (throwing.includes(message.type)) throw new Error(`${message.type} broke`);
      handled.push(message.type);
    },
    failStart: (err) => {
      failedStarts.push(err);
      return new Promise<never>(() => {});
    },
    logger: { error: (_obj, msg) => errors.push(msg) },
    ...overrides,
  });
  return { receive, sent, handled, errors, failedStarts };
}

/** Lets queued handling and promise callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("workerInbox", () => {
  it("logs a coordination message that throws, and goes on answering", async () => {
    const box = inbox({
      coordinate: (message) => {
        if (message.type === "clawgate:quota-grant") throw new Error("bad grant");
        return false;
      },
    });
    expect(() => box.receive({ type: "clawgate:quota-grant", grant: "!" })).not.toThrow();
    box.receive({ type: "clawgate:ping" });
    expect(box.errors).toEqual(["proxy worker failed to handle a message"]);
    expect(box.sent).toEqual([{ type: "clawgate:pong" }]);
  });

  it("logs a scrape whose collection fails, with no unhandled rejection", async () => {
    const box = inbox({ metrics: () => Promise.reject(new Error("collect broke")) });
    box.receive({ type: "clawgate:metrics", id: 7 });
    await settle();
    expect(box.errors).toEqual(["collecting the worker's metrics failed"]);
    expect(box.sent).toEqual([]);
  });

  it("logs a queued message that throws and handles the next in turn", async () => {
    const box = inbox({}, ["clawgate:commit"]);
    box.receive({ type: "clawgate:commit", id: 1 });
    box.receive({ type: "clawgate:abort", id: 2 });
    await settle();
    expect(box.errors).toEqual(["proxy worker failed to handle a message"]);
    expect(box.handled).toEqual(["clawgate:abort"]);
    expect(box.failedStarts).toEqual([]);
  });

  it("answers a prepare that throws with a refusal, so the apply need not wait it out", async () => {
    const box = inbox({}, ["clawgate:prepare"]);
    box.receive({ type: "clawgate:prepare", id: 3, update: { kind: "delta", bytes: "" } });
    await settle();
    expect(box.sent).toEqual([
      {
        type: "clawgate:prepared",
        id: 3,
        ok: false,
        reason: "worker could not prepare the update: clawgate:prepare broke",
      },
    ]);
  });

  it("ends the worker through failStart when init fails, and handles nothing after it", async () => {
    const box = inbox({}, ["clawgate:init"]);
    box.receive({ type: "clawgate:init", snapshot: undefined, unusable: [] });
    box.receive({ type: "clawgate:abort", id: 1 });
    await settle();
    expect(box.failedStarts).toEqual([new Error("clawgate:init broke")]);
    expect(box.handled).toEqual([]);
  });
});
