import { describe, expect, it } from "vitest";
import { accessLogSinkOn } from "./access-log-sink.js";

// Each write to the log's destination is a round trip through libuv's thread pool whose cost
// hardly depends on its size: a busy proxy hands lines on 64 KiB at a time, not 32 KiB.
describe("the access log's default batch", () => {
  it("hands on more than 40 KiB of lines in one write", async () => {
    const writes: Buffer[] = [];
    const sink = accessLogSinkOn(
      { write: (chunk) => writes.push(chunk) },
      { flushAfterMs: 60_000 },
    );
    const lines = 300;
    for (let i = 0; i < lines; i++) {
      const line = sink.line();
      line.requestId = `req-${i}`;
      line.method = "GET";
      line.path = "/api/items";
      line.status = 200;
      sink.write(line);
    }
    expect(writes).toHaveLength(0);
    await sink.close();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.length).toBeGreaterThan(40 * 1024);
    expect(
      String(writes[0])
        .split("\n")
        .filter((l) => l !== ""),
    ).toHaveLength(lines);
  });
});
