import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { buildAdminApp } from "../admin/app.js";
import type { DataPlaneView } from "../fleet/data-plane-view.js";
import { ConfigService } from "../resources/config-service.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { type ClawctlIo, runClawctl } from "./clawctl-program.js";

const TOKEN = "clawctl-test-token-0123456789";
const NOW = Date.parse("2025-03-01T12:00:00.000Z");

const status: SnapshotStatus = {
  version: 12,
  published: false,
  publishedVersion: 9,
  reason: "route api names upstream gone, which does not exist",
  problems: [{ key: "/clawgate/routes/api", message: "upstream gone does not exist" }],
  counts: { routes: 1, upstreams: 0, breakers: 0, tenants: 0 },
};
const fleet: DataPlaneView[] = [
  {
    nodeId: "dp-a",
    hostname: "a",
    softwareVersion: "0.1.0",
    connected: true,
    state: "SYNCED",
    appliedVersion: 9,
    publishedVersion: 9,
    lastSeen: "2025-03-01T11:59:55.000Z",
  },
  {
    nodeId: "dp-b",
    hostname: "b",
    softwareVersion: "0.1.0",
    connected: false,
    state: "DISCONNECTED",
    appliedVersion: 4,
    publishedVersion: 9,
    lastSeen: "2025-03-01T11:50:00.000Z",
  },
];

const manifestYaml = `
kind: upstream
name: agents
spec:
  nodes:
    - address: 127.0.0.1:9001
      weight: 3
---
- kind: route
  name: api
  spec:
    match: { pathPrefix: /api }
    upstream: agents
- kind: breakers
  name: strict
  spec: { consecutiveFailures: 2 }
`;

let store: Store;
let app: FastifyInstance;
let server: string;

beforeAll(async () => {
  store = await openEmbeddedStore({});
  app = await buildAdminApp({
    config: new ConfigService(store, "/clawgate/"),
    snapshot: { status: () => status },
    fleet: { list: () => fleet },
    token: TOKEN,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  server = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await app.close();
  await store.close();
});

beforeEach(async () => {
  // Each test starts from an empty config.
  const all = await store.range("/clawgate/");
  await store.commit(
    [],
    all.items.map((item) => ({ type: "delete" as const, key: item.key })),
  );
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function clawctl(
  args: string[],
  io: Partial<ClawctlIo> & { files?: Record<string, string>; stdin?: string } = {},
): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const files = io.files ?? {};
  const code = await runClawctl(args, {
    env: { CLAWGATE_ADMIN_URL: server, CLAWGATE_ADMIN_TOKEN: TOKEN },
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    readFile: async (path) => {
      const text = files[path];
      if (text === undefined) throw new Error(`ENOENT: no such file ${path}`);
      return text;
    },
    readStdin: async () => io.stdin ?? "",
    now: () => NOW,
    ...io,
  });
  return { code, stdout, stderr };
}

describe("clawctl", () => {
  it("applies a YAML manifest of several documents and lists and gets what it wrote", async () => {
    const applied = await clawctl(["apply", "-f", "config.yaml"], {
      files: { "config.yaml": manifestYaml },
    });
    expect(applied.stderr).toBe("");
    expect(applied.code).toBe(0);
    expect(applied.stdout).toContain("upstreams/agents created");
    expect(applied.stdout).toContain("routes/api created");
    expect(applied.stdout).toContain("breakers/strict created");

    const list = await clawctl(["get", "upstreams"]);
    expect(list.code).toBe(0);
    const [header, row] = list.stdout.trimEnd().split("\n");
    expect(header).toMatch(/^NAME\s+REVISION\s+NODES\s+BREAKER$/);
    expect(row).toMatch(/^agents\s+\d+\s+127\.0\.0\.1:9001\*3\s+default$/);

    const route = await clawctl(["get", "route", "api", "-o", "json"]);
    expect(route.code).toBe(0);
    expect(JSON.parse(route.stdout)).toMatchObject({
      name: "api",
      spec: { match: { pathPrefix: "/api" }, upstream: "agents" },
    });

    // YAML output goes back into apply unchanged.
    const yaml = await clawctl(["get", "routes", "-o", "yaml"]);
    expect(parseAllDocuments(yaml.stdout).map((doc) => doc.toJS())).toMatchObject([
      { kind: "route", name: "api", spec: { upstream: "agents" } },
    ]);
    const again = await clawctl(["apply", "-f", "-"], { stdin: yaml.stdout });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("routes/api unchanged");
  });

  it("dry run reports and changes nothing; prune deletes what the file leaves out", async () => {
    const dry = await clawctl(["apply", "-f", "-", "--dry-run"], { stdin: manifestYaml });
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain("upstreams/agents created (dry run)");
    expect((await store.range("/clawgate/upstreams/")).items).toEqual([]);

    await clawctl(["apply", "-f", "-"], { stdin: manifestYaml });
    const json = JSON.stringify([
      {
        kind: "upstream",
        name: "agents",
        spec: { nodes: [{ address: "127.0.0.1:9001", weight: 3 }] },
      },
      { kind: "route", name: "api", spec: { match: { pathPrefix: "/api" }, upstream: "agents" } },
    ]);
    const pruned = await clawctl(["apply", "-f", "c.json", "--prune", "-o", "json"], {
      files: { "c.json": json },
    });
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.stdout).results).toContainEqual(
      expect.objectContaining({ kind: "breakers", name: "strict", action: "deleted" }),
    );
    expect(await store.get("/clawgate/breakers/strict")).toBeUndefined();
  });

  it("applies a JSON export of 20,000 resources (about 48 MB) in one request", async () => {
    // Read through the YAML parser, this file took over 3 minutes before apply even started.
    const resources = [];
    for (let i = 0; i < 10_000; i++) {
      const nodes = Array.from({ length: 110 }, (_, n) => ({
        address: `10.${(i >> 8) & 255}.${i & 255}.${n + 1}:8080`,
        weight: 1 + (n % 5),
      }));
      resources.push({ kind: "upstream", name: `u-${i}`, spec: { nodes } });
      resources.push({
        kind: "route",
        name: `r-${i}`,
        spec: { match: { pathPrefix: `/big/${i}` }, upstream: `u-${i}` },
      });
    }

    const applied = await clawctl(["apply", "-f", "big.json", "-o", "json"], {
      files: { "big.json": JSON.stringify({ resources }) },
    });

    expect(applied.stderr).toBe("");
    expect(applied.code).toBe(0);
    expect(JSON.parse(applied.stdout).results).toHaveLength(20_000);
    expect((await store.range("/clawgate/routes/")).items).toHaveLength(10_000);
  }, 60_000);

  it("prints the API's message and exits 1 when a write is refused", async () => {
    const missing = await clawctl(["apply", "-f", "-"], {
      stdin: "kind: route\nname: api\nspec: { match: { pathPrefix: /api }, upstream: nope }\n",
    });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(
      "Error: route api names upstream nope, which does not exist (CLAWGATE_REFERENCE_CONFLICT)",
    );

    const invalid = await clawctl(["apply", "-f", "-"], {
      stdin: "kind: upstream\nname: agents\nspec: { nodes: [{ address: nowhere }] }\n",
    });
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain("upstreams/agents nodes.0.address: must be host:port");

    await clawctl(["apply", "-f", "-"], { stdin: manifestYaml });
    const inUse = await clawctl(["delete", "upstream", "agents"]);
    expect(inUse.code).toBe(1);
    expect(inUse.stderr).toContain("upstream agents is used by routes api");

    const notFound = await clawctl(["get", "tenants", "ghost"]);
    expect(notFound.code).toBe(1);
    expect(notFound.stderr).toContain("tenant ghost not found (CLAWGATE_NOT_FOUND)");
  });

  it("deletes a resource", async () => {
    await clawctl(["apply", "-f", "-"], { stdin: manifestYaml });
    const deleted = await clawctl(["delete", "routes", "api"]);
    expect(deleted).toMatchObject({ code: 0, stdout: "routes/api deleted\n" });
    expect(await store.get("/clawgate/routes/api")).toBeUndefined();
  });

  it("shows the snapshot status and the data planes", async () => {
    const snapshot = await clawctl(["snapshot"]);
    expect(snapshot.code).toBe(0);
    expect(snapshot.stdout).toMatch(/VERSION:\s+12/);
    expect(snapshot.stdout).toMatch(/PUBLISHED:\s+false/);
    expect(snapshot.stdout).toContain("upstream gone does not exist");
    expect(parse((await clawctl(["snapshot", "-o", "yaml"])).stdout)).toEqual(status);

    const planes = await clawctl(["dataplanes"]);
    expect(planes.code).toBe(0);
    expect(planes.stdout.trimEnd().split("\n")).toEqual([
      "NODE ID   STATE          APPLIED   PUBLISHED   LAST SEEN",
      "dp-a      SYNCED         9         9           5s ago",
      "dp-b      DISCONNECTED   4         9           10m ago",
    ]);
    expect(JSON.parse((await clawctl(["dataplanes", "-o", "json"])).stdout)).toEqual({
      items: fleet,
    });
  });

  it("reads the token from --token and from CLAWGATE_ADMIN_TOKEN_FILE, and fails without it", async () => {
    const noToken = await clawctl(["get", "upstreams"], { env: { CLAWGATE_ADMIN_URL: server } });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toContain("missing bearer token (CLAWGATE_UNAUTHORIZED)");

    const flag = await clawctl(["--server", server, "--token", TOKEN, "get", "upstreams"], {
      env: {},
    });
    expect(flag).toMatchObject({ code: 0, stdout: "No upstreams found.\n" });

    const file = await clawctl(["get", "upstreams"], {
      env: { CLAWGATE_ADMIN_URL: server, CLAWGATE_ADMIN_TOKEN_FILE: "/run/token" },
      files: { "/run/token": `${TOKEN}\n` },
    });
    expect(file.code).toBe(0);
  });

  it("exits 2 on usage errors", async () => {
    expect((await clawctl(["get", "widgets"])).code).toBe(2);
    expect((await clawctl(["get"])).code).toBe(2);
    expect((await clawctl(["frobnicate"])).code).toBe(2);
    expect((await clawctl(["snapshot", "-o", "xml"])).code).toBe(2);
    expect((await clawctl(["apply"])).code).toBe(2);
    expect(
      (await clawctl(["get", "upstreams"], { env: { CLAWGATE_ADMIN_URL: "ftp://x" } })).code,
    ).toBe(2);
    expect((await clawctl(["--help"])).code).toBe(0);
  });

  it("exits 1 with a clear message for an unreadable or malformed manifest, or no server", async () => {
    const missing = await clawctl(["apply", "-f", "nope.yaml"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("cannot read nope.yaml");
    const malformed = await clawctl(["apply", "-f", "-"], { stdin: "kind: [unclosed\n" });
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toContain("Error: stdin");
    const noSpec = await clawctl(["apply", "-f", "-"], { stdin: "kind: route\nname: api\n" });
    expect(noSpec.stderr).toContain("spec is required");

    const down = await clawctl(["get", "upstreams"], {
      env: { CLAWGATE_ADMIN_URL: "http://127.0.0.1:1", CLAWGATE_ADMIN_TOKEN: TOKEN },
    });
    expect(down.code).toBe(1);
    expect(down.stderr).toContain("cannot reach the admin API at http://127.0.0.1:1");
  });

  it("without a token, names every place it looked and how to fix it", async () => {
    const run = await clawctl(["get", "routes"], { env: { CLAWGATE_ADMIN_URL: server } });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    const lines = run.stderr.split("\n");
    expect(lines).toContain("  clawctl found no admin token; it looked at:");
    expect(lines).toContain("    --token: not given");
    expect(lines).toContain("    CLAWGATE_ADMIN_TOKEN: not set");
    expect(lines).toContain("    CLAWGATE_ADMIN_TOKEN_FILE: not set");
    expect(lines).toContain(`    ${resolve(".clawgate/admin-token")}: no such file`);
    expect(run.stderr).toContain("fix: pass --token <token>, set CLAWGATE_ADMIN_TOKEN");

    const emptyFile = await clawctl(["get", "routes"], {
      env: { CLAWGATE_ADMIN_URL: server, CLAWGATE_ADMIN_TOKEN_FILE: "token.txt" },
      files: { "token.txt": "\n" },
    });
    expect(emptyFile.code).toBe(1);
    expect(emptyFile.stderr).toContain(
      `CLAWGATE_ADMIN_TOKEN_FILE: ${resolve("token.txt")} is empty`,
    );

    const found = await clawctl(["get", "routes"], {
      env: { CLAWGATE_ADMIN_URL: server },
      files: { "./.clawgate/admin-token": `${TOKEN}\n` },
    });
    expect(found.stderr).toBe("");
    expect(found.code).toBe(0);
  });

  it("says which token the admin API refused", async () => {
    const run = await clawctl(["get", "routes"], {
      env: { CLAWGATE_ADMIN_URL: server, CLAWGATE_ADMIN_TOKEN: "wrong-token-0123456789" },
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("the admin API refused the token from CLAWGATE_ADMIN_TOKEN");
  });
});
