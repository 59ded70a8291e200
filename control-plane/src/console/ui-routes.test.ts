import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { buildAdminApp } from "../admin/app.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";

const TOKEN = "ui-test-token-0123456789";
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function adminWithUi(dir: string) {
  const store = await openEmbeddedStore({});
  cleanup.push(() => store.close());
  const app = await buildAdminApp({
    config: new ConfigService(store, "/clawgate/"),
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
    ui: { dir },
  });
  cleanup.push(() => app.close());
  return app;
}

async function builtUi(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "clawgate-ui-"));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, "assets"));
  await writeFile(join(dir, "index.html"), "<!doctype html><title>console</title>");
  await writeFile(join(dir, "assets", "index-abc123.js"), "console.log(1)");
  await writeFile(join(dir, "assets", "index-abc123.css"), "body{}");
  return dir;
}

describe("the console at /ui", () => {
  it("serves the page and its assets without a token, with content types and caching", async () => {
    const app = await adminWithUi(await builtUi());
    const bare = await app.inject({ method: "GET", url: "/ui" });
    expect(bare.statusCode).toBe(308);
    expect(bare.headers.location).toBe("/ui/");

    const page = await app.inject({ method: "GET", url: "/ui/" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.headers["cache-control"]).toBe("no-cache");
    expect(page.headers["content-security-policy"]).toContain("connect-src 'self'");
    expect(page.body).toContain("<title>console</title>");

    const script = await app.inject({ method: "GET", url: "/ui/assets/index-abc123.js" });
    expect(script.statusCode).toBe(200);
    expect(script.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(script.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect(script.headers["x-content-type-options"]).toBe("nosniff");
    const style = await app.inject({ method: "GET", url: "/ui/assets/index-abc123.css" });
    expect(style.headers["content-type"]).toBe("text/css; charset=utf-8");
  });

  it("answers 404 naming the asset, and never serves files outside the build", async () => {
    const app = await adminWithUi(await builtUi());
    const missing = await app.inject({ method: "GET", url: "/ui/assets/nope.js" });
    expect(missing.statusCode).toBe(404);
    expect(missing.body).toBe("no console asset named nope.js\n");
    const outside = await app.inject({ method: "GET", url: "/ui/assets/..%2F..%2Fpackage.json" });
    expect(outside.statusCode).toBe(404);
  });

  it("says how to build the console when it was not built", async () => {
    const app = await adminWithUi(join(tmpdir(), "clawgate-ui-never-built"));
    const page = await app.inject({ method: "GET", url: "/ui/" });
    expect(page.statusCode).toBe(404);
    expect(page.body).toContain("npm run build");
  });

  it("still wants the token for the API the page calls", async () => {
    const app = await adminWithUi(await builtUi());
    const status = await app.inject({ method: "GET", url: "/v1/snapshot" });
    expect(status.statusCode).toBe(401);
  });
});
