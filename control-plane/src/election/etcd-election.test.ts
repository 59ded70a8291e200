import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { upstreamSchema } from "@clawgate/proto";
import { Etcd3 } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { FleetHealth } from "../health/fleet-health.js";
import type { HealEventInput } from "../journal/heal-event.js";
import {
  type RemediationAttemptResult,
  RemediationRunner,
} from "../remediation/remediation-runner.js";
import { type EtcdProcess, startEtcd } from "../testing/index.js";
import { createEtcdElection } from "./etcd-election.js";
import type { LeaderElection } from "./leader-election.js";

const PREFIX = "/clawgate-test/";
const RECORDER = fileURLToPath(new URL("../remediation/testdata/record-argv.mjs", import.meta.url));
const NODE = "127.0.0.1:9001";

let etcd: EtcdProcess;
let dir: string;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  etcd = await startEtcd();
  dir = await mkdtemp(join(tmpdir(), "clawgate-election-"));
}, 30_000);
afterAll(async () => {
  await etcd?.stop();
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function election(instanceId: string, name: string): LeaderElection {
  const e = createEtcdElection({
    endpoints: [etcd.endpoint],
    prefix: PREFIX,
    instanceId,
    name,
    ttlSeconds: 2,
    retryMs: 100,
  });
  cleanups.push(() => e.stop());
  return e;
}

function becomes(e: LeaderElection, leader: boolean): Promise<void> {
  return new Promise((resolve) => {
    if (e.isLeader() === leader) return resolve();
    const off = e.onChange((now) => {
      if (now !== leader) return;
      off();
      resolve();
    });
  });
}

/** One control-plane replica: its own view of fleet health, its own runner, a shared command. */
function replica(instanceId: string, e: LeaderElection, recording: string) {
  const health = new FleetHealth();
  const journal: HealEventInput[] = [];
  const results: RemediationAttemptResult[] = [];
  const remediation = upstreamSchema.parse({
    remediation: { command: [process.execPath, RECORDER, recording, "{node}"] },
  }).remediation;
  const runner = new RemediationRunner({
    health,
    policies: { remediation: async () => remediation },
    journal: {
      record: async (event) => {
        journal.push(event);
        return {} as never;
      },
    },
    election: e,
    source: `control-plane/${instanceId}`,
    allow: { commands: [process.execPath], webhookOrigins: [] },
    // Test containers often run as root; what is tested here is not the root refusal.
    allowRoot: true,
  });
  runner.start();
  cleanups.push(() => runner.stop());
  const nextResult = () =>
    new Promise<RemediationAttemptResult>((resolve) => {
      const off = runner.onResult((result) => {
        off();
        resolve(result);
      });
    });
  // Both replicas hear the same data planes.
  for (const dp of ["dp-1", "dp-2"]) {
    health.report(dp, [
      { upstream: "x", address: NODE, state: "evicted", evidence: "refused", changedAtMs: 0 },
    ]);
  }
  return { runner, journal, results, nextResult };
}

async function lines(file: string): Promise<number> {
  const text = await readFile(file, "utf8").catch(() => "");
  return text.split("\n").filter(Boolean).length;
}

describe("etcd leader election", () => {
  it("lets only the leader remediate, and the other takes over when the leader stops", async () => {
    const recording = join(dir, "takeover.jsonl");
    const ea = election("cp-a", "takeover");
    await ea.start();
    await becomes(ea, true);
    const eb = election("cp-b", "takeover");
    await eb.start();

    const b = replica("cp-b", eb, recording);
    const firstRun = replica("cp-a", ea, recording).nextResult();
    // Replica a started after b and still ran first: it leads.
    expect((await firstRun).outcome).toBe("ok");
    expect(await lines(recording)).toBe(1);
    expect(eb.isLeader()).toBe(false);
    expect(b.journal).toEqual([]);

    const bRuns = b.nextResult();
    await ea.stop();
    await becomes(eb, true);
    expect((await bRuns).outcome).toBe("ok");
    expect(await lines(recording)).toBe(2);
    expect(b.journal.map((e) => [e.action, e.source])).toEqual([
      ["remediation_attempt", "control-plane/cp-b"],
      ["remediation_result", "control-plane/cp-b"],
    ]);
  }, 30_000);

  it("drops leadership when its etcd session is lost, and another replica is elected", async () => {
    const ea = election("cp-a", "session");
    await ea.start();
    await becomes(ea, true);
    const eb = election("cp-b", "session");
    await eb.start();

    // Revoke a's session lease behind its back, as etcd does when keepalives stop arriving.
    const admin = new Etcd3({ hosts: [etcd.endpoint] });
    try {
      const values = await admin.getAll().prefix(`${PREFIX}election/session/`).strings();
      const aKey = Object.entries(values).find(([, value]) => value === "cp-a")?.[0];
      expect(aKey).toBeDefined();
      const aLease = (await admin.get(aKey as string).exec()).kvs[0]?.lease as string;
      const lost = becomes(ea, false);
      await admin.leaseClient.leaseRevoke({ ID: aLease });
      await lost;
      await becomes(eb, true);
      expect(ea.isLeader()).toBe(false);
    } finally {
      admin.close();
    }
  }, 30_000);

  it("steps down when etcd goes away", async () => {
    const own = await startEtcd();
    try {
      const e = createEtcdElection({
        endpoints: [own.endpoint],
        prefix: PREFIX,
        instanceId: "cp-alone",
        ttlSeconds: 1,
        retryMs: 100,
      });
      cleanups.push(() => e.stop());
      await e.start();
      await becomes(e, true);
      const lost = becomes(e, false);
      await own.stop();
      await lost;
      expect(e.isLeader()).toBe(false);
    } finally {
      await own.stop();
    }
  }, 30_000);
});
