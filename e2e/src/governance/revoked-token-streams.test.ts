import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane, Teardown } from "../support/index.js";

/** A GET /v1/live stream: `ended` settles when the control plane closes it, never before. */
async function openStream(adminUrl: string, token: string) {
  const abort = new AbortController();
  const response = await fetch(`${adminUrl}/v1/live`, {
    headers: { authorization: `Bearer ${token}` },
    signal: abort.signal,
  });
  expect(response.status).toBe(200);
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  // The opening comment: the stream is open and counted before the token is revoked.
  await reader.read();
  const ended = (async () => {
    try {
      for (;;) if ((await reader.read()).done) return "ended";
    } catch {
      // A destroyed socket ends the body with an error: closed all the same.
      return "ended";
    }
  })();
  return { ended, close: () => abort.abort() };
}

// Two control planes on one etcd: a token revoked through either ends its streams on both.
describe("revoking a token closes the streams opened with it (two replicas, real etcd)", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let first: ControlPlane;
  let second: ControlPlane;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    first = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-1" },
      { name: "cp-1" },
    );
    teardown.add("cp-1", () => first.stop());
    second = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-2" },
      { name: "cp-2" },
    );
    teardown.add("cp-2", () => second.stop());
  }, 60_000);
  afterAll(() => teardown.run());

  async function viewer(name: string): Promise<string> {
    const created = await first.admin.call<{ token: string }>("POST", "/v1/tokens", {
      name,
      role: "viewer",
    });
    expect(created.status).toBe(201);
    return created.body.token;
  }

  it("ends the revoked token's live streams on this replica and the other, and no one else's", async () => {
    const doomed = await viewer("doomed");
    const kept = await viewer("kept");
    // The second replica knows both tokens through its watch once it lets them in.
    const onFirst = await openStream(first.adminUrl, doomed);
    const onSecond = await openStream(second.adminUrl, doomed);
    const other = await openStream(second.adminUrl, kept);
    teardown.add("streams", async () => {
      for (const stream of [onFirst, onSecond, other]) stream.close();
    });

    expect((await first.admin.call("DELETE", "/v1/tokens/doomed")).status).toBe(200);

    // Revoked on cp-1 itself; cp-2 learns it from the token watch.
    expect(await onFirst.ended).toBe("ended");
    expect(await onSecond.ended).toBe("ended");
    // The other token's stream is still open once the revoked one's closed on the same replica.
    const still = await Promise.race([other.ended, Promise.resolve("open")]);
    expect(still).toBe("open");
    const again = await fetch(`${second.adminUrl}/v1/live`, {
      headers: { authorization: `Bearer ${doomed}` },
    });
    expect(again.status).toBe(401);
  }, 60_000);
});
