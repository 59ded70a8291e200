import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { logUnhandledRejections } from "./unhandled-rejections.js";

describe("logUnhandledRejections", () => {
  // vitest reports unhandled rejections itself; step its listeners aside so the process sees
  // only ours, as the data-plane binary does.
  const saved = process.listeners("unhandledRejection");
  let remove: (() => void) | undefined;

  afterEach(() => {
    remove?.();
    for (const listener of saved) {
      if (!process.listeners("unhandledRejection").includes(listener)) {
        process.on("unhandledRejection", listener);
      }
    }
  });

  it("logs a stray rejection with its message and the process carries on", async () => {
    const lines: Record<string, unknown>[] = [];
    let logged!: () => void;
    const seen = new Promise<void>((resolve) => (logged = resolve));
    const logger = pino(
      new Writable({
        write(chunk, _encoding, done) {
          lines.push(JSON.parse(String(chunk)));
          logged();
          done();
        },
      }),
    );
    for (const listener of saved) process.off("unhandledRejection", listener);
    remove = logUnhandledRejections(logger);

    void Promise.reject(new Error("stray rejection while proxying"));
    await seen;

    expect(lines).toEqual([
      expect.objectContaining({
        level: 50,
        msg: "unhandled promise rejection; serving on",
        err: expect.objectContaining({ message: "stray rejection while proxying" }),
      }),
    ]);
  });
});
