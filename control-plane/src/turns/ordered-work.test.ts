import { afterEach, describe, expect, it, vi } from "vitest";
import { OrderedWork } from "./ordered-work.js";
import { TurnBudget } from "./turn-budget.js";

afterEach(() => vi.restoreAllMocks());

describe("OrderedWork", () => {
  it("runs a key's pieces in order across turns, the first at once while the turn has budget", async () => {
    const done: string[] = [];
    const work = new OrderedWork(new TurnBudget(2), () => {});
    const piece = (name: string) =>
      function* () {
        yield 2;
        done.push(name);
      };
    work.run("a", piece("a1"));
    work.run("a", piece("a2"));
    work.run("b", piece("b1"));
    expect(done).toEqual(["a1"]);
    expect(work.pending("a")).toBe(true);
    await work.idle();
    expect(done.filter((name) => name.startsWith("a"))).toEqual(["a1", "a2"]);
    expect(done).toContain("b1");
    expect(work.pending("a")).toBe(false);
  });

  it("keeps a key's later pieces running when a piece fails and its error handler throws too", async () => {
    const warning = vi.spyOn(process, "emitWarning").mockImplementation(() => {});
    const done: string[] = [];
    const work = new OrderedWork(new TurnBudget(1), () => {
      throw new Error("handler bug");
    });
    work.run("a", function* () {
      yield 1;
    });
    work.run("a", function* () {
      yield 1;
      throw new Error("bad report");
    });
    work.run("a", function* () {
      yield 1;
      done.push("after");
    });
    await work.idle();
    expect(done).toEqual(["after"]);
    expect(warning).toHaveBeenCalledWith(
      expect.objectContaining({ message: "handler bug" }),
      expect.objectContaining({ code: "CLAWGATE_ORDERED_WORK_ERROR_HANDLER" }),
    );
  });

  it("runs nothing more once closed: a waiting piece stops at its next step, later ones never start", async () => {
    const done: string[] = [];
    const errors: unknown[] = [];
    const work = new OrderedWork(new TurnBudget(1), (_key, error) => errors.push(error));
    work.run("a", function* () {
      try {
        yield 1;
        done.push("a1 first slice");
        yield 1;
        done.push("a1 second slice");
      } finally {
        done.push("a1 finally");
      }
    });
    const later = work.run("a", function* () {
      yield 1;
      done.push("a2");
    });
    expect(later).toBeInstanceOf(Promise);
    expect(done).toEqual(["a1 first slice"]);

    await work.close();
    expect(done).toEqual(["a1 first slice", "a1 finally"]);
    expect(
      work.run("b", function* () {
        yield 1;
        done.push("b after close");
      }),
    ).toBeUndefined();
    expect(work.pending("a")).toBe(false);
    expect(work.queued("a")).toBe(0);
    await later;
    await work.idle();
    expect(done).toEqual(["a1 first slice", "a1 finally"]);
    expect(errors).toEqual([]);
  });

  it("waits for a promise a piece yields before its next step, and counts its pieces meanwhile", async () => {
    const done: string[] = [];
    const work = new OrderedWork(new TurnBudget(10), () => {});
    let release: () => void = () => {};
    const taken = new Promise<void>((resolve) => {
      release = resolve;
    });
    work.run("a", function* () {
      done.push("handed over");
      yield taken;
      done.push("taken in");
    });
    work.run("a", function* () {
      yield 1;
      done.push("next");
    });
    expect(work.queued("a")).toBe(2);
    // Turns go by; the piece still waits for what it handed over.
    await new Promise((resolve) => setImmediate(resolve));
    expect(done).toEqual(["handed over"]);
    release();
    await work.idle();
    expect(done).toEqual(["handed over", "taken in", "next"]);
    expect(work.queued("a")).toBe(0);
  });
});
