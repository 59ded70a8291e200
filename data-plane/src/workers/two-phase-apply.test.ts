import { describe, expect, it } from "vitest";
import type { SnapshotApplyResult } from "../snapshot-client/snapshot-client.js";
import { type Participants, TwoPhaseApply } from "./two-phase-apply.js";
import type { ToWorker } from "./worker-messages.js";

/** Workers 1 and 2 as the coordinator sees them: every message sent to each, in order. */
function twoWorkers() {
  const sent: { to: number; message: ToWorker }[] = [];
  const alive = new Set([1, 2]);
  const participants: Participants = {
    ids: () => [...alive],
    send: (to, message) => sent.push({ to, message }),
  };
  const types = (to: number) => sent.filter((s) => s.to === to).map((s) => s.message.type);
  return { sent, alive, participants, types };
}

const update = { kind: "delta" as const, bytes: "" };
const ok = async (): Promise<SnapshotApplyResult> => ({ ok: true });

describe("TwoPhaseApply", () => {
  it("commits in every worker once all prepared and the primary applied, then resolves", async () => {
    const { participants, sent, types } = twoWorkers();
    const applies = new TwoPhaseApply(participants);
    let localRan = false;
    const done = applies.run(update, async () => {
      localRan = true;
      return { ok: true };
    });
    await sentToAll(sent, "clawgate:prepare", 1);
    applies.prepared(1, 1, { ok: true });
    await Promise.resolve();
    // One worker has not answered: nobody serves the new version yet, not even the primary.
    expect(localRan).toBe(false);
    expect(types(1)).toEqual(["clawgate:prepare"]);
    applies.prepared(2, 1, { ok: true });
    await sentToAll(sent, "clawgate:commit", 1);
    expect(localRan).toBe(true);
    let settled = false;
    void done.then(() => {
      settled = true;
    });
    applies.committed(1, 1);
    await Promise.resolve();
    expect(settled).toBe(false);
    applies.committed(2, 1);
    expect(await done).toEqual({ ok: true });
  });

  it("aborts every worker when one refuses, and NACKs with that worker's reason", async () => {
    const { participants, sent, types } = twoWorkers();
    const applies = new TwoPhaseApply(participants);
    let localRan = false;
    const done = applies.run(update, async () => {
      localRan = true;
      return { ok: true };
    });
    await sentToAll(sent, "clawgate:prepare", 1);
    applies.prepared(1, 1, { ok: true });
    applies.prepared(2, 1, { ok: false, reason: "route r: upstream u missing" });
    expect(await done).toEqual({ ok: false, reason: "worker 2: route r: upstream u missing" });
    // The worker that had prepared drops it: no worker moves to a version the others refused.
    expect(types(1)).toEqual(["clawgate:prepare", "clawgate:abort"]);
    expect(types(2)).toEqual(["clawgate:prepare", "clawgate:abort"]);
    expect(localRan).toBe(false);
  });

  it("aborts the workers when the primary itself refuses or is superseded", async () => {
    const { participants, sent, types } = twoWorkers();
    const applies = new TwoPhaseApply(participants);
    const refused = applies.run(update, async () => ({ ok: false, reason: "bad" }));
    await sentToAll(sent, "clawgate:prepare", 1);
    applies.prepared(1, 1, { ok: true });
    applies.prepared(2, 1, { ok: true });
    expect(await refused).toEqual({ ok: false, reason: "bad" });
    const superseded = applies.run(update, async () => undefined);
    await sentToAll(sent, "clawgate:prepare", 2);
    applies.prepared(1, 2, { ok: true });
    applies.prepared(2, 2, { ok: true });
    expect(await superseded).toBeUndefined();
    expect(types(1)).toEqual([
      "clawgate:prepare",
      "clawgate:abort",
      "clawgate:prepare",
      "clawgate:abort",
    ]);
  });

  it("completes with the workers left when one dies mid-apply", async () => {
    const { participants, sent, alive } = twoWorkers();
    const applies = new TwoPhaseApply(participants);
    const done = applies.run(update, ok);
    await sentToAll(sent, "clawgate:prepare", 1);
    applies.prepared(1, 1, { ok: true });
    alive.delete(2);
    applies.gone(2);
    await sentToAll(sent, "clawgate:commit", 1);
    applies.committed(1, 1);
    expect(await done).toEqual({ ok: true });
  });

  it("goes on without a worker that does not answer in time, and reports it hung", async () => {
    const { participants, sent, alive, types } = twoWorkers();
    const hung: string[] = [];
    let reported!: () => void;
    const hungReported = new Promise<void>((resolve) => {
      reported = resolve;
    });
    const applies = new TwoPhaseApply(participants, {
      answerTimeoutMs: 20,
      // The pool kills it: from then on it is no participant.
      hung: (worker, reason) => {
        hung.push(`${worker}: ${reason}`);
        alive.delete(worker);
        reported();
      },
    });
    const done = applies.run(update, ok);
    await sentToAll(sent, "clawgate:prepare", 1);
    // Worker 2's event loop is stuck: it never answers.
    applies.prepared(1, 1, { ok: true });
    await hungReported;
    await sentToAll(sent, "clawgate:commit", 1);
    applies.committed(1, 1);
    // Not a NACK: the version was not refused, a process failed.
    expect(await done).toEqual({ ok: true });
    expect(hung).toEqual(["2: no answer to prepare within 20 ms"]);
    expect(types(1)).toEqual(["clawgate:prepare", "clawgate:commit"]);
    // Killed: a write to its dead channel would fail and take the primary down with it.
    expect(types(2)).toEqual(["clawgate:prepare"]);
  });

  it("reports a worker hung on commit too, and resolves only after the deadline", async () => {
    const { participants, sent, alive } = twoWorkers();
    const hung: number[] = [];
    const applies = new TwoPhaseApply(participants, {
      answerTimeoutMs: 20,
      hung: (worker) => {
        hung.push(worker);
        alive.delete(worker);
      },
    });
    let settled = false;
    const done = applies.run(update, ok).finally(() => {
      settled = true;
    });
    await sentToAll(sent, "clawgate:prepare", 1);
    applies.prepared(1, 1, { ok: true });
    applies.prepared(2, 1, { ok: true });
    await sentToAll(sent, "clawgate:commit", 1);
    applies.committed(1, 1);
    await Promise.resolve();
    expect(settled).toBe(false);
    expect(await done).toEqual({ ok: true });
    expect(hung).toEqual([2]);
  });

  it("runs applies one after another, and lets a new worker join only between them", async () => {
    const { participants, sent } = twoWorkers();
    const applies = new TwoPhaseApply(participants);
    const first = applies.run(update, ok);
    const second = applies.run(update, ok);
    const joined: string[] = [];
    applies.whenIdle(() => joined.push("joined"));
    await sentToAll(sent, "clawgate:prepare", 1);
    // The second waits for the first: only one prepare per worker is out.
    expect(sent.filter((s) => s.to === 1).map((s) => s.message)).toEqual([
      { type: "clawgate:prepare", id: 1, update },
    ]);
    for (const id of [1, 2]) {
      await waitUntil(() =>
        sent.some((s) => s.message.type === "clawgate:prepare" && s.message.id === id),
      );
      applies.prepared(1, id, { ok: true });
      applies.prepared(2, id, { ok: true });
      await waitUntil(() =>
        sent.some((s) => s.message.type === "clawgate:commit" && s.message.id === id),
      );
      expect(joined).toEqual([]);
      applies.committed(1, id);
      applies.committed(2, id);
    }
    expect(await first).toEqual({ ok: true });
    expect(await second).toEqual({ ok: true });
    expect(joined).toEqual(["joined"]);
  });

  it("reads an update given as a function when its turn comes, after the applies before it", async () => {
    const { participants, sent } = twoWorkers();
    const applies = new TwoPhaseApply(participants);
    // What the primary serves; the apply ahead moves it from version 1 to 2.
    let served = "v1";
    const newer = applies.run({ kind: "delta", bytes: "v2" }, async () => {
      served = "v2";
      return { ok: true };
    });
    // An upstream-TLS reload asks, during that apply, to compile again what is served.
    const reload = applies.run(() => ({ kind: "snapshot", bytes: served }), ok);
    await sentToAll(sent, "clawgate:prepare", 1);
    applies.prepared(1, 1, { ok: true });
    applies.prepared(2, 1, { ok: true });
    await sentToAll(sent, "clawgate:commit", 1);
    applies.committed(1, 1);
    applies.committed(2, 1);
    expect(await newer).toEqual({ ok: true });
    await sentToAll(sent, "clawgate:prepare", 2);
    // The workers compile version 2 again: never version 1, which would roll them back.
    expect(sent.filter((s) => s.to === 1).map((s) => s.message)).toContainEqual({
      type: "clawgate:prepare",
      id: 2,
      update: { kind: "snapshot", bytes: "v2" },
    });
    applies.prepared(1, 2, { ok: true });
    applies.prepared(2, 2, { ok: true });
    await sentToAll(sent, "clawgate:commit", 2);
    applies.committed(1, 2);
    applies.committed(2, 2);
    expect(await reload).toEqual({ ok: true });
  });

  it("applies nothing when an update given as a function has none by its turn", async () => {
    const { participants, sent } = twoWorkers();
    const applies = new TwoPhaseApply(participants);
    let localRan = false;
    const skipped = applies.run(
      () => undefined,
      async () => {
        localRan = true;
        return { ok: true };
      },
    );
    expect(await skipped).toBeUndefined();
    expect(localRan).toBe(false);
    expect(sent).toEqual([]);
  });

  it("starts no apply once stopped, while one under way still ends as workers answer", async () => {
    const { participants, sent, types } = twoWorkers();
    const applies = new TwoPhaseApply(participants);
    const underWay = applies.run(update, ok);
    let queuedRan = false;
    const queued = applies.run(update, async () => {
      queuedRan = true;
      return { ok: true };
    });
    await sentToAll(sent, "clawgate:prepare", 1);
    applies.stop();
    applies.prepared(1, 1, { ok: true });
    applies.prepared(2, 1, { ok: true });
    await sentToAll(sent, "clawgate:commit", 1);
    applies.committed(1, 1);
    applies.committed(2, 1);
    expect(await underWay).toEqual({ ok: true });
    // Its prepare would wait behind each worker's drain: it is never sent, nor applied here.
    expect(await queued).toBeUndefined();
    expect(queuedRan).toBe(false);
    expect(await applies.run(update, ok)).toBeUndefined();
    expect(types(1)).toEqual(["clawgate:prepare", "clawgate:commit"]);
    expect(types(2)).toEqual(["clawgate:prepare", "clawgate:commit"]);
  });

  it("applies in the primary alone when no worker hears messages yet", async () => {
    const applies = new TwoPhaseApply({ ids: () => [], send: () => {} });
    expect(await applies.run(update, ok)).toEqual({ ok: true });
  });
});

/** Waits until `type` went out to every worker for apply `id`: answers before it are not due. */
async function sentToAll(sent: { to: number; message: ToWorker }[], type: string, id: number) {
  await waitUntil(
    () =>
      sent.filter((s) => s.message.type === type && "id" in s.message && s.message.id === id)
        .length >= 1,
  );
}

/** Lets queued promise callbacks run until `condition` holds (no timers involved). */
async function waitUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !condition(); i++) await Promise.resolve();
  if (!condition()) throw new Error("condition never held");
}
