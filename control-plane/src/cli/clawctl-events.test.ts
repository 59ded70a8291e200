import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildAdminApp } from "../admin/app.js";
import { Journal } from "../journal/journal.js";
import { NodeRegistry } from "../registry/node-registry.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { runClawctl } from "./clawctl-program.js";

const PREFIX = "/clawgate/";
const TOKEN = "clawctl-events-token";
const T0 = Date.parse("2025-03-01T12:00:00.000Z");

let store: Store;
let app: FastifyInstance;
let server: string;

beforeAll(async () => {
  store = await openEmbeddedStore({});
  let now = T0;
  const journal = new Journal({ store, prefix: PREFIX, clock: () => now });
  const config = new ConfigService(store, PREFIX);
  const registry = new NodeRegistry({ store, prefix: PREFIX, clock: () => T0 });
  app = await buildAdminApp({
    config,
    snapshot: {
      status: () => ({
        version: 0,
        published: false,
        publishedVersion: null,
        counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
      }),
    },
    fleet: { list: () => [] },
    token: TOKEN,
    registry,
    journal,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  server = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

  await config.apply([
    {
      kind: "upstreams",
      name: "agents",
      document: { nodes: [{ address: "127.0.0.1:9001", weight: 3 }] },
    },
  ]);
  await registry.register("agents", "node-7", { address: "127.0.0.1:9007", ttlSeconds: 30 });
  await journal.record({
    upstream: "agents",
    node: "127.0.0.1:9001",
    action: "evict",
    evidence: "2 consecutive probe failures:\nconnect ECONNREFUSED",
    source: "dp-1",
  });
  now = T0 + 5_000;
  await journal.record({
    upstream: "agents",
    node: "127.0.0.1:9001",
    action: "remediation_result",
    outcome: "ok",
    source: "control-plane/cp-1",
  });
  now = T0 + 9_000;
  await journal.record({ upstream: "tools", action: "registry_expiry", source: "cp" });
});

afterAll(async () => {
  await app.close();
  await store.close();
});

async function clawctl(args: string[]) {
  let stdout = "";
  let stderr = "";
  const code = await runClawctl(args, {
    env: { CLAWGATE_ADMIN_URL: server, CLAWGATE_ADMIN_TOKEN: TOKEN },
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    readFile: async () => {
      throw new Error("no files here");
    },
  });
  return { code, stdout, stderr };
}

describe("clawctl events", () => {
  it("prints the journal as a table, newest first", async () => {
    const run = await clawctl(["events"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^TIME\s+UPSTREAM\s+NODE\s+ACTION\s+OUTCOME\s+EVIDENCE$/);
    expect(lines.slice(1)).toHaveLength(3);
    expect(lines[1]).toMatch(/^2025-03-01T12:00:09Z\s+tools\s+-\s+registry_expiry\s+-\s+-$/);
    expect(lines[2]).toMatch(
      /^2025-03-01T12:00:05Z\s+agents\s+127\.0\.0\.1:9001\s+remediation_result\s+ok\s+-$/,
    );
    // Multi-line evidence stays on its row.
    expect(lines[3]).toMatch(
      /^2025-03-01T12:00:00Z\s+agents\s+127\.0\.0\.1:9001\s+evict\s+-\s+2 consecutive probe failures: connect ECONNREFUSED$/,
    );
  });

  it("filters by upstream and limit, and prints JSON", async () => {
    const agents = await clawctl(["events", "--upstream", "agents", "--limit", "1", "-o", "json"]);
    expect(agents.code).toBe(0);
    const items = JSON.parse(agents.stdout).items;
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ upstream: "agents", action: "remediation_result" });

    const none = await clawctl(["events", "--upstream", "nothing-here"]);
    expect(none.stdout).toBe("No events found.\n");
  });

  it("refuses a bad limit as a usage error", async () => {
    const run = await clawctl(["events", "--limit", "0"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("must be an integer from 1 to 1000");
  });
});

describe("clawctl nodes", () => {
  it("lists an upstream's nodes with their source", async () => {
    const run = await clawctl(["nodes", "agents"]);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ADDRESS\s+WEIGHT\s+SOURCE\s+ID\s+ACTIVE\s+TTL\s+EXPIRES IN$/);
    expect(lines[1]).toMatch(/^127\.0\.0\.1:9001\s+3\s+config\s+-\s+yes\s+-\s+-$/);
    expect(lines[2]).toMatch(/^127\.0\.0\.1:9007\s+1\s+registry\s+node-7\s+yes\s+30s\s+30s$/);
  });

  it("exits 1 with the API's message for a missing upstream", async () => {
    const run = await clawctl(["nodes", "nope"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("upstream nope not found (CLAWGATE_NOT_FOUND)");
  });
});
