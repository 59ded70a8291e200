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
});
