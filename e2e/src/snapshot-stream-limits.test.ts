import { type ConnectionState, SnapshotClient } from "@clawgate/data-plane";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane, Teardown, waitFor } from "./support/index.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * The data plane's real snapshot client with the given identity, started; resolves with the
 * version of its first snapshot or the reason its first stream ended. Stopped by `teardown`.
 */
function firstAttempt(
  teardown: Teardown,
  cp: ControlPlane,
  nodeId: string,
  hostname = `${nodeId}.local`,
): Promise<{ applied: number } | { refused: string }> {
  return new Promise((resolve) => {
    const client = new SnapshotClient({
      addresses: [cp.grpcAddress],
      nodeId,
      hostname,
      softwareVersion: "test",
      lastAppliedVersion: () => 0,
      logger: quiet,
      // One attempt is the whole story: no retry within the test's lifetime.
      backoff: { baseMs: 600_000, maxMs: 600_000 },
      apply: (snapshot) => {
        resolve({ applied: Number(snapshot.version) });
        return { ok: true };
      },
    });
    teardown.add(nodeId, () => client.stop());
    client.onStateChange((state: ConnectionState) => {
      if (state.status === "waiting") resolve({ refused: state.reason });
    });
    client.start();
  });
}

// What a client of the gRPC port may send, with the real control-plane binary: bounded fields,
// and a bounded number of streams (issue 8: 50 streams of 3 MB Hellos took it to 1 GB).
describe("snapshot stream limits", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;

  beforeAll(async () => {
    cp = await startControlPlane({ CLAWGATE_GRPC_MAX_STREAMS: "1" });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("agents", { nodes: [] });
  });

  afterAll(() => teardown.run());

  it("refuses an oversize Hello naming the field, and lists nothing", async () => {
    const outcome = await firstAttempt(teardown, cp, "dp-long", "h".repeat(300));
    expect(outcome).toMatchObject({
      refused: expect.stringMatching(
        /INVALID_ARGUMENT.*Hello\.hostname is 300 characters long; the limit is 253/,
      ),
    });
    expect(await cp.admin.dataplanes()).toEqual([]);
    expect(cp.process.output.grep("h".repeat(254))).toEqual([]);
  });

  it("refuses a stream over CLAWGATE_GRPC_MAX_STREAMS with RESOURCE_EXHAUSTED", async () => {
    const first = await firstAttempt(teardown, cp, "dp-first");
    expect(first).toMatchObject({ applied: expect.any(Number) });
    const second = await firstAttempt(teardown, cp, "dp-second");
    expect(second).toMatchObject({
      refused: expect.stringMatching(/RESOURCE_EXHAUSTED.*grpcMaxStreams 1/),
    });
    const listed = (await cp.admin.dataplanes()).map((item) => item.nodeId);
    expect(listed).toEqual(["dp-first"]);
    await waitFor(() => cp.process.output.grep("too many open streams").length > 0, {
      what: "the control plane to log the refused stream",
      timeoutMs: 5_000,
    });
  });
});
