import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import type { ProbeParty, ProbeVerdictMessage } from "./probe-coordination.js";
import { probeClaimKey } from "./probe-keys.js";
import { StoredProbeCoordinator } from "./stored-probe-coordinator.js";

const quiet = { debug() {}, info() {}, warn() {} };

function party(id: string): ProbeParty & { got: ProbeVerdictMessage[] } {
  const got: ProbeVerdictMessage[] = [];
  return { id, nodeId: id, got, send: (verdict) => got.push(verdict) };
}

/** Resolves once `party` has been sent `count` verdicts. */
async function verdicts(party: { got: ProbeVerdictMessage[] }, count: number) {
  while (party.got.length < count) await new Promise((resolve) => setImmediate(resolve));
  return party.got[count - 1];
}

describe("StoredProbeCoordinator (two replicas sharing one store)", () => {
  let store: Store;
  const started: StoredProbeCoordinator[] = [];
  async function replica(replicaId: string): Promise<StoredProbeCoordinator> {
    const probes = new StoredProbeCoordinator({ store, prefix: "/cg/", replicaId, logger: quiet });
    await probes.start();
    started.push(probes);
    return probes;
  }
  afterEach(async () => {
    for (const probes of started.splice(0)) await probes.stop();
    await store.close();
  });

  it("names one prober across replicas and relays its verdict to the other replica's waiter", async () => {
    store = await openEmbeddedStore({});
    const [one, two] = [await replica("cp-1"), await replica("cp-2")];
    const a = party("a");
    const b = party("b");
    one.claim(a, "models");
    expect(await verdicts(a, 1)).toMatchObject({ prober: "a" });
    two.claim(b, "models");
    expect(await verdicts(b, 1)).toMatchObject({ prober: "a", outcome: "" });
    two.release(b, "models", true); // not the prober: ignored
    one.release(a, "models", false);
    expect(await verdicts(b, 2)).toMatchObject({ prober: "", outcome: "failure" });
    expect(await store.get(probeClaimKey("/cg/", "models"))).toBeUndefined();
  });

  it("frees the claim of a prober whose stream ended, telling waiters nobody probes", async () => {
    store = await openEmbeddedStore({});
    const [one, two] = [await replica("cp-1"), await replica("cp-2")];
    const a = party("a");
    const b = party("b");
    one.claim(a, "models");
    await verdicts(a, 1);
    two.claim(b, "models");
    await verdicts(b, 1);
    one.leave(a);
    expect(await verdicts(b, 2)).toMatchObject({ prober: "", outcome: "" });
    two.claim(b, "models");
    expect(await verdicts(b, 3)).toMatchObject({ prober: "b" });
  });
});
