import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { runAfterSwap } from "./after-swap.js";

describe("runAfterSwap", () => {
  it("logs a step that throws with its name and version, and still runs the rest", () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino(
      new Writable({
        write(chunk, _encoding, done) {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    );
    const ran: string[] = [];
    expect(() =>
      runAfterSwap(
        [
          ["pools", () => ran.push("pools")],
          [
            "health",
            () => {
              throw new Error("worker gone");
            },
          ],
          ["metrics", () => ran.push("metrics")],
        ],
        7,
        logger,
      ),
    ).not.toThrow();
    expect(ran).toEqual(["pools", "metrics"]);
    expect(lines).toEqual([
      expect.objectContaining({
        step: "health",
        version: 7,
        msg: "snapshot applied, but a step after the swap failed",
        err: expect.objectContaining({ message: "worker gone" }),
      }),
    ]);
  });
});
