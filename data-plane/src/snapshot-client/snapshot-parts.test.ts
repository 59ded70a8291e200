import { create, SnapshotSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { SnapshotParts } from "./snapshot-parts.js";

type Init = NonNullable<Parameters<typeof create<typeof SnapshotSchema>>[1]>;

const part = (version: number, index: number, parts: number, init: Init = {}) =>
  create(SnapshotSchema, {
    version: BigInt(version),
    nonce: `n${version}`,
    part: index,
    parts,
    routes: [{ name: `r-${version}-${index}` }],
    ...init,
  });

describe("SnapshotParts", () => {
  it("passes a whole snapshot through", () => {
    const whole = part(1, 0, 0);
    expect(new SnapshotParts().add(whole)).toEqual({ status: "whole", snapshot: whole });
  });

  it("puts parts back in part order, whatever order they came in", () => {
    const parts = new SnapshotParts();
    expect(parts.add(part(2, 2, 3)).status).toBe("waiting");
    expect(parts.add(part(2, 0, 3, { createdAtMs: 5n })).status).toBe("waiting");
    // A part sent twice counts once.
    expect(parts.add(part(2, 0, 3)).status).toBe("waiting");
    const result = parts.add(part(2, 1, 3));
    expect(result.status).toBe("whole");
    if (result.status !== "whole") return;
    expect(result.snapshot.routes.map((r) => r.name)).toEqual(["r-2-0", "r-2-1", "r-2-2"]);
    expect(result.snapshot).toMatchObject({ version: 2n, nonce: "n2", part: 0, parts: 0 });
    expect(parts.pending).toBe(0);
  });

  it("drops an incomplete snapshot when another version starts, and never completes it", () => {
    const parts = new SnapshotParts();
    parts.add(part(3, 0, 2));
    expect(parts.add(part(4, 0, 2)).status).toBe("waiting");
    // Part 1 of version 3 now belongs to nothing being assembled, and displaces nothing.
    expect(parts.add(part(3, 1, 2)).status).toBe("stale");
    expect(parts.pending).toBe(1);
    const result = parts.add(part(4, 1, 2));
    expect(result.status === "whole" && result.snapshot.version).toBe(4n);
  });

  it("refuses and drops an assembly that grows past its resource limit", () => {
    const parts = new SnapshotParts(4_096, 2);
    expect(parts.add(part(6, 0, 3)).status).toBe("waiting");
    expect(parts.add(part(6, 1, 3))).toEqual({ status: "waiting" });
    expect(parts.add(part(6, 2, 3))).toEqual({
      status: "refused",
      reason: "snapshot part refused: snapshot holds over 2 resources",
    });
    expect(parts.pending).toBe(0);
  });

  it.each([
    ["a part beyond the count", part(5, 3, 3), "part 3 is beyond parts 0..2"],
    ["a numbered part of a whole snapshot", part(5, 2, 1), "part 2 of a snapshot in 1 part(s)"],
    ["more parts than the limit", part(5, 0, 5000), "announces 5000 parts, over the limit of 4096"],
  ])("refuses %s, saying why", (_, message, reason) => {
    const result = new SnapshotParts().add(message);
    expect(result).toEqual({ status: "refused", reason: `snapshot part refused: ${reason}` });
  });
});
