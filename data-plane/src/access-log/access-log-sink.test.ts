import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { settingOrigin } from "@clawgate/runtime";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../config/load-config.js";
import { heapAllocated } from "../testing/heap-allocated.js";
import { accessLogTarget, createAccessLogSink } from "./access-log-sink.js";

describe("the access log written to a file", () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("writes a burst of lines whole, in order, at a heap cost of a few hundred bytes at most", async () => {
    dir = await mkdtemp(join(tmpdir(), "clawgate-access-log-"));
    const path = join(dir, "access.log");
    const sink = createAccessLogSink({ kind: "file", path }, (error) => {
      throw error;
    })!;
    const lines = 2_000;
    // A burst written while earlier lines are still on their way: they pile up in one batch.
    // In string mode sonic-boom re-measured (and so copied) the whole pending batch for every
    // line appended, well over 4 KiB per line by the end of a 16 KiB batch.
    const allocated = heapAllocated(() => {
      for (let i = 0; i < lines; i++) {
        const line = sink.line();
        line.requestId = `r${i}`;
        line.path = "/api/items";
        line.status = 200;
        sink.write(line);
      }
    });
    await sink.close();

    const written = (await readFile(path, "utf8")).split("\n").filter((l) => l !== "");
    expect(written).toHaveLength(lines);
    expect(written.map((l) => JSON.parse(l).requestId)).toEqual(
      Array.from({ length: lines }, (_, i) => `r${i}`),
    );
    expect(written[0]!.startsWith('{"log":"access","time":')).toBe(true);

    // Lines are written straight into the batch buffer: a line costs no Buffer and no string.
    // JSON.stringify and a Buffer per line cost 600 B and more here.
    expect(allocated / lines).toBeLessThan(400);
  });
  it("holds a few lines back to write them as one batch, and writes them without more traffic", async () => {
    dir = await mkdtemp(join(tmpdir(), "clawgate-access-log-"));
    const path = join(dir, "access.log");
    const sink = createAccessLogSink({ kind: "file", path }, (error) => {
      throw error;
    })!;
    for (let i = 0; i < 3; i++) {
      const line = sink.line();
      line.requestId = `r${i}`;
      sink.write(line);
    }
    // Written one by one, the first line would be on its way already (a file append is one
    // fs round trip, the batch waits for a timer): nothing has been handed to the file yet.
    expect(await readFile(path, "utf8")).toBe("");
    // No further line and no close: the flush timer writes the batch.
    let text = "";
    while (text.split("\n").filter(Boolean).length < 3) text = await readFile(path, "utf8");
    expect(
      text
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l).requestId),
    ).toEqual(["r0", "r1", "r2"]);
    await sink.close();
  });

  it("writes what it holds before flushSync returns, as the process's exit needs", async () => {
    dir = await mkdtemp(join(tmpdir(), "clawgate-access-log-"));
    const path = join(dir, "access.log");
    const sink = createAccessLogSink({ kind: "file", path }, (error) => {
      throw error;
    })!;
    // sonic-boom opens the file asynchronously: wait until a line can reach it.
    const first = sink.line();
    first.requestId = "r0";
    sink.write(first);
    while (!readFileSync(path, "utf8").includes("r0")) await new Promise((r) => setTimeout(r, 20));
    for (let i = 1; i <= 3; i++) {
      const line = sink.line();
      line.requestId = `r${i}`;
      sink.write(line);
    }
    // No turn of the event loop between the call and the read: an exit has none either.
    sink.flushSync();
    const ids = readFileSync(path, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l).requestId);
    expect(ids).toEqual(["r0", "r1", "r2", "r3"]);
    await sink.close();
  });
});

describe("an access log file that cannot be opened", () => {
  it("fails the boot naming the setting, the path and the layer it came from", async () => {
    const dir = await mkdtemp(join(tmpdir(), "clawgate-access-log-"));
    const path = join(dir, "missing", "access.log");
    try {
      const config = loadConfig({ argv: [], env: { CLAWGATE_ACCESS_LOG: path } });
      const open = () =>
        createAccessLogSink(
          accessLogTarget(config.accessLog, settingOrigin(config, "accessLog")),
          () => {},
        );
      expect(open).toThrow(
        `accessLog = "${path}" (from env CLAWGATE_ACCESS_LOG): cannot open the file for appending (ENOENT)`,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
