import { createHash } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { TokenStore } from "../auth/token-store.js";
import { dumpYaml, readCurrentConfig } from "../cli/current-config.js";
import { ConfigHistory } from "../history/config-history.js";
import { ConfigAudit } from "../journal/config-audit.js";
import { Journal } from "../journal/journal.js";
import { NodeRegistry } from "../registry/node-registry.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/clawgate/";
const BOOTSTRAP = "bootstrap-token-0123456789";
const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const HASHES = [sha("k-1"), sha("k-2")];

let store: Store;
let tokens: TokenStore;
let app: FastifyInstance;
let version: number;

beforeEach(async () => {
  store = await openEmbeddedStore({});
  tokens = new TokenStore({ store, prefix: PREFIX, bootstrapToken: BOOTSTRAP });
  await tokens.start();
  app = await buildAdminApp({
    config: new ConfigService(store, PREFIX),
    snapshot: {
      status: () => ({
        version: 0,
        published: false,
        publishedVersion: null,
        counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
      }),
    },
    fleet: { list: () => [] },
    tokens,
    audit: new ConfigAudit({ store, prefix: PREFIX }),
    history: new ConfigHistory({ store, prefix: PREFIX }),
    journal: new Journal({ store, prefix: PREFIX }),
    registry: new NodeRegistry({ store, prefix: PREFIX }),
    logger: pino({ level: "silent" }),
  });
  const put = await call(BOOTSTRAP, "PUT", "/v1/tenants/acme", { apiKeySha256: HASHES });
  expect(put.statusCode, put.body).toBe(201);
  version = put.json().revision;
});
afterEach(async () => {
  await app.close();
  await tokens.stop();
  await store.close();
});

function call(token: string, method: "GET" | "PUT" | "POST", url: string, body?: unknown) {
  return app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { payload: body as object }),
  });
}

async function token(name: string, role: string): Promise<string> {
  const response = await call(BOOTSTRAP, "POST", "/v1/tokens", { name, role });
  expect(response.statusCode, response.body).toBe(201);
  return response.json().token;
}

/** The tenant acme's key hashes in every read a token makes of it. */
async function keysRead(bearer: string): Promise<unknown[]> {
  const list = await call(bearer, "GET", "/v1/tenants");
  const one = await call(bearer, "GET", "/v1/tenants/acme");
  const entry = await call(bearer, "GET", `/v1/history/${version}`);
  for (const response of [list, one, entry]) expect(response.statusCode, response.body).toBe(200);
  const historic = entry.json().resources.find((r: { kind: string }) => r.kind === "tenants");
  return [
    list.json().items[0].spec.apiKeySha256,
    one.json().spec.apiKeySha256,
    historic.spec.apiKeySha256,
  ];
}

// Viewers once read every tenant's key hashes (the data plane's /config_dump already hid them):
// a hash of a weak key is as good as the key, to anyone who can guess offline.
describe("tenant key hashes through the admin API", () => {
  it("are redacted for a viewer, count kept, in lists, reads and history entries", async () => {
    const reads = await keysRead(await token("dash", "viewer"));
    expect(reads).toEqual([
      ["[redacted]", "[redacted]"],
      ["[redacted]", "[redacted]"],
      ["[redacted]", "[redacted]"],
    ]);
  });

  it("are shown to an editor and an admin", async () => {
    for (const bearer of [await token("ci", "editor"), BOOTSTRAP]) {
      expect(await keysRead(bearer)).toEqual([HASHES, HASHES, HASHES]);
    }
  });

  it("survive an editor's clawctl dump -> apply round trip unchanged", async () => {
    const editor = await token("ci", "editor");
    const api = {
      request: async <T>(method: string, path: string, body?: unknown): Promise<T> => {
        const response = await call(editor, method as "GET", path, body);
        if (response.statusCode >= 400) throw new Error(response.body);
        return response.json() as T;
      },
    };
    const yaml = dumpYaml(await readCurrentConfig(api as never));
    const resources = parseAllDocuments(yaml).map((doc) => {
      const { kind, name, spec } = doc.toJSON();
      return { kind, name, spec };
    });
    const applied = await call(editor, "POST", "/v1/apply", { resources });
    expect(applied.statusCode, applied.body).toBe(200);
    expect(applied.json().results).toEqual([
      expect.objectContaining({ kind: "tenants", name: "acme", action: "unchanged" }),
    ]);
    expect((await call(BOOTSTRAP, "GET", "/v1/tenants/acme")).json().spec.apiKeySha256).toEqual(
      HASHES,
    );
  });
});
