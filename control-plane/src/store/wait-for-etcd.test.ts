import { describe, expect, it } from "vitest";
import type { Store } from "./store.js";
import { shortReason, waitForEtcd } from "./wait-for-etcd.js";

const GRPC_REFUSED =
  "14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:23999. Resolution note: \n    at callErrorFromStatus (call.js:32:19)";

describe("waitForEtcd", () => {
  it("reports one line per failed attempt, without stack or credentials, until etcd answers", async () => {
    const failures = [
      new Error(GRPC_REFUSED),
      new Error("Execution prevented because the circuit breaker is open"),
    ];
    const probed: string[] = [];
    const store = {
      async get(key: string) {
        probed.push(key);
        const failure = failures.shift();
        if (failure !== undefined) throw failure;
        return undefined;
      },
    } as unknown as Store;
    const messages: string[] = [];
    await waitForEtcd(store, {
      endpoints: ["http://root:secret@127.0.0.1:23999", "http://127.0.0.1:23998"],
      probeKey: "/clawgate/",
      backoff: { next: () => 0 },
      onUnreachable: (message) => {
        messages.push(message);
      },
    });
    expect(probed).toEqual(["/clawgate/", "/clawgate/", "/clawgate/"]);
    expect(messages).toEqual([
      "cannot reach etcd at http://127.0.0.1:23999,http://127.0.0.1:23998: ECONNREFUSED 127.0.0.1:23999",
      "cannot reach etcd at http://127.0.0.1:23999,http://127.0.0.1:23998: ECONNREFUSED 127.0.0.1:23999 (client holding off)",
    ]);
  });
});

describe("shortReason", () => {
  it("keeps the first line of an error without a socket code", () => {
    expect(shortReason(new Error("etcdserver: user name is empty\n  at x"))).toBe(
      "etcdserver: user name is empty",
    );
  });
});
