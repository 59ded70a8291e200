import { SnapshotDeltaSchema, SnapshotSchema, toBinary } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { deltaOf, routeAt, snapshotOf } from "../testing/delta-fixture.js";
import { WorkerSnapshots } from "./worker-snapshots.js";

const snapshotBytes = (version: number) =>
  Buffer.from(toBinary(SnapshotSchema, snapshotOf(version, 10, 3))).toString("base64");
const deltaBytes = (version: number, init: Parameters<typeof deltaOf>[1]) =>
  Buffer.from(toBinary(SnapshotDeltaSchema, deltaOf(version, init))).toString("base64");

describe("WorkerSnapshots", () => {
  it("serves a prepared delta only once it is committed", async () => {
    const worker = new WorkerSnapshots();
    expect(await worker.init(snapshotBytes(5))).toEqual({ ok: true });
    const vote = await worker.prepare(1, {
      kind: "delta",
      bytes: deltaBytes(6, { routes: [routeAt(40, 3)] }),
    });
    expect(vote).toEqual({ ok: true });
    // Prepared is not served: until the commit every request still sees version 5.
    expect(worker.current()?.version).toBe(5);
    expect(worker.commit(1)?.version).toBe(6);
    expect(worker.current()?.version).toBe(6);
    expect(worker.current()?.match("GET", "any.test", "/api/v1/s40/x", {})?.name).toBe("r-40");
  });

  it("drops an aborted update and keeps serving the version it had", async () => {
    const worker = new WorkerSnapshots();
    await worker.init(snapshotBytes(5));
    await worker.prepare(1, { kind: "snapshot", bytes: snapshotBytes(6) });
    worker.abort(1);
    expect(worker.commit(1)).toBeUndefined();
    expect(worker.current()?.version).toBe(5);
  });

  it("refuses a delta on another version, naming both", async () => {
    const worker = new WorkerSnapshots();
    await worker.init(snapshotBytes(5));
    const vote = await worker.prepare(1, {
      kind: "delta",
      bytes: deltaBytes(8, { baseVersion: 7n }),
    });
    expect(vote).toEqual({ ok: false, reason: expect.stringMatching(/7.*5/) });
    expect(worker.current()?.version).toBe(5);
  });

  it("refuses a delta before any snapshot, and bytes that do not decode", async () => {
    const worker = new WorkerSnapshots();
    expect(await worker.prepare(1, { kind: "delta", bytes: deltaBytes(2, {}) })).toEqual({
      ok: false,
      reason: "delta 2 arrived before any snapshot was served",
    });
    expect(await worker.prepare(2, { kind: "snapshot", bytes: "//8=" })).toMatchObject({
      ok: false,
      reason: expect.stringContaining("worker could not apply the update"),
    });
  });
});
