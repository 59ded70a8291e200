import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  answer,
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import { runClawctl, send, startControlPlane, Teardown, waitFor } from "../support/index.js";
import { launchChromium } from "./browser.js";
import { CONSOLE_REPLICA, type ConsoleCluster, startConsoleCluster } from "./console-cluster.js";

/** How long the page may take to show a change; a bound on a wait, not a timed assertion. */
const SHOWN_WITHIN_MS = 15_000;

// Real processes (etcd, a control plane, two data planes, two upstream nodes) and a real
// Chromium reading the console the control plane serves.
describe("the fleet console in a browser", () => {
  const teardown = new Teardown();
  let cluster: ConsoleCluster;
  let browser: Browser;
  /** Answers 500 to everything: its breaker opens after a few requests. */
  let failing: ScriptedUpstream;

  beforeAll(async () => {
    failing = await startScriptedUpstream(answer(500, "failing"));
    teardown.add("failing upstream", () => failing.close());
    cluster = await startConsoleCluster(teardown, [
      {
        kind: "breaker",
        name: "trip",
        // Opens after 4 requests half failed; a cooldown long enough to stay open while looked at.
        spec: { minRequests: 4, failureRatio: 0.5, cooldownMs: 120_000, maxCooldownMs: 120_000 },
      },
      {
        kind: "upstream",
        name: "failing",
        // TCP-only probes: its /healthz answers 500 too, and an eviction by probes would make
        // the data plane answer 503 itself before the breaker ever opens.
        spec: {
          nodes: [{ address: failing.address }],
          breaker: "trip",
          healthCheck: { path: null },
        },
      },
      {
        kind: "route",
        name: "failing",
        spec: { match: { pathPrefix: "/failing" }, upstream: "failing" },
      },
    ]);
    browser = await launchChromium();
    teardown.add("chromium", () => browser.close());
  }, 90_000);

  afterAll(() => teardown.run());

  async function openPage(fragment: string, adminUrl = cluster.cp.adminUrl): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    teardown.add("browser context", () => context.close());
    const page = await context.newPage();
    await page.goto(`${adminUrl}/ui/${fragment}`);
    return page;
  }

  it("takes a viewer token from #token=, shows both data planes SYNCED at the published version, then a killed node evicted, pushed without a reload", async () => {
    const { cp, version, dataPlanes, nodes } = cluster;
    // A viewer token is all the page needs.
    const { body: viewer } = await cp.admin.call<{ token: string }>("POST", "/v1/tokens", {
      name: "console-viewer",
      role: "viewer",
    });
    const page = await openPage(`#token=${encodeURIComponent(viewer.token)}`);

    // Fleet: the published version, and each data plane SYNCED at it.
    await page.waitForSelector(`#published-version:text-is("${version}")`, {
      timeout: SHOWN_WITHIN_MS,
    });
    for (const dp of dataPlanes) {
      const row = page.locator(`tr[data-node-id="${dp.nodeId}"]`);
      await row.locator('[data-applied]:text-is("' + version + '")').waitFor({
        timeout: SHOWN_WITHIN_MS,
      });
      expect(await row.getAttribute("data-state")).toBe("SYNCED");
    }
    // The token left the address bar (and history) and stays in this tab's sessionStorage.
    expect(new URL(page.url()).hash).toBe("");
    expect(await page.evaluate("Object.values(sessionStorage)")).toContain(viewer.token);

    // Upstreams: both nodes healthy on both data planes.
    await page.getByRole("tab", { name: "Upstreams" }).click();
    const [victim, survivor] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
    const nodeRow = (address: string, majority: string) =>
      page.locator(`tr[data-node="${address}"][data-majority="${majority}"]`);
    for (const node of nodes) {
      await nodeRow(node.address, "healthy").waitFor({ timeout: SHOWN_WITHIN_MS });
    }
    await page.getByText("Live", { exact: true }).waitFor();
    // A mark on the page's window: it survives only if the page is never reloaded.
    await page.evaluate('window.consoleMarker = "not reloaded"');

    await victim.process.kill();

    // The verdict arrives over /v1/live: the row turns evicted in the same page.
    await nodeRow(victim.address, "evicted").waitFor({ timeout: SHOWN_WITHIN_MS });
    expect(await nodeRow(victim.address, "evicted").locator("td.num").first().textContent()).toBe(
      "0 of 2",
    );
    await nodeRow(survivor.address, "healthy").waitFor();
    expect(await page.evaluate("window.consoleMarker")).toBe("not reloaded");

    // A click shows the node's heal events with their evidence.
    await nodeRow(victim.address, "evicted").getByRole("button").click();
    const evict = page.locator('.detail li.event[data-action="evict"]').first();
    await evict.waitFor({ timeout: SHOWN_WITHIN_MS });
    expect(await evict.locator(".evidence").textContent()).not.toBe("");

    // Journal: the same evictions in the timeline, filterable by action.
    await page.getByRole("tab", { name: "Journal" }).click();
    await page.getByLabel("Action").selectOption("evict");
    await page.locator('.timeline li.event[data-action="evict"]').first().waitFor();
    expect(await page.locator('.timeline li.event:not([data-action="evict"])').count()).toBe(0);

    // Config: a route changed by a new version shows that version, and the diff names it.
    await cp.admin.apply([
      {
        kind: "route",
        name: "api",
        spec: { match: { pathPrefix: "/api" }, upstream: "api", priority: 5 },
      },
    ]);
    const { body: stored } = await cp.admin.call<{ revision: number }>("GET", "/v1/routes/api");
    await page.getByRole("tab", { name: "Config" }).click();
    const route = page.locator("#resources tbody tr", { has: page.locator('th:text-is("api")') });
    await route
      .locator(`td.num:text-is("${stored.revision}")`)
      .waitFor({ timeout: SHOWN_WITHIN_MS });
    await page.getByRole("button", { name: "Compare" }).click();
    const change = page.locator('.changes li[data-change="changed"]');
    await change.waitFor({ timeout: SHOWN_WITHIN_MS });
    expect(await change.textContent()).toContain("/api");
    // The changed field, old and new value, on one line.
    expect(await change.locator(".fields li").allTextContents()).toEqual(["priority: 0 → 5"]);
    expect(await page.evaluate("window.consoleMarker")).toBe("not reloaded");
  });

  it("shows a data plane's breaker opening, with its cooldown, pushed without a reload", async () => {
    const { cp, dataPlanes } = cluster;
    const [tripping, other] = dataPlanes as [(typeof dataPlanes)[0], (typeof dataPlanes)[0]];
    const page = await openPage(`#token=${encodeURIComponent(cp.token)}`);
    await page.getByRole("tab", { name: "Upstreams" }).click();
    await page.getByRole("searchbox", { name: "Upstream", exact: true }).fill("failing");
    const upstream = page.locator('article[data-upstream="failing"]');
    await upstream.locator('[data-breakers="closed"]').waitFor({ timeout: SHOWN_WITHIN_MS });
    await page.getByText("Live", { exact: true }).waitFor();
    await page.evaluate('window.consoleMarker = "not reloaded"');

    // 500s through one data plane until its breaker opens and it answers 503 itself.
    await waitFor(async () => (await send(`${tripping.proxyUrl}/failing/x`)).status === 503, {
      what: `the breaker of upstream failing to open on ${tripping.nodeId}`,
      timeoutMs: SHOWN_WITHIN_MS,
    });

    // The data plane reports it, the control plane pushes it over /v1/live.
    const item = upstream.locator(`li[data-data-plane="${tripping.nodeId}"][data-state="open"]`);
    await item.waitFor({ timeout: SHOWN_WITHIN_MS });
    expect(await item.textContent()).toContain("cooldown until");
    expect(await upstream.locator(`li[data-data-plane="${other.nodeId}"]`).count()).toBe(0);
    expect(await page.evaluate("window.consoleMarker")).toBe("not reloaded");

    // The same breaker in the API the page reads, and in clawctl status.
    const { body } = await cp.admin.call<{ breakers: { dataPlane: string; state: string }[] }>(
      "GET",
      "/v1/upstreams/failing/health",
    );
    expect(body.breakers).toMatchObject([{ dataPlane: tripping.nodeId, state: "open" }]);
    const status = await runClawctl(["status"], {
      CLAWGATE_ADMIN_URL: cp.adminUrl,
      CLAWGATE_ADMIN_TOKEN: cp.token,
    });
    expect(status.code, status.stderr).toBe(0);
    const section = status.stdout.slice(status.stdout.indexOf("BREAKERS OPEN OR HALF-OPEN"));
    const line = section.split("\n").find((l) => l.includes(tripping.nodeId));
    expect(line).toMatch(/^\s*failing\s+\S+\s+open\s/);
  });

  it("shows the whole fleet on another replica, each data plane with the replica it streams from", async () => {
    const { etcd, dataPlanes, version } = cluster;
    // A second replica no data plane streams from.
    const other = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-console-2" },
      { name: "cp-console-2" },
    );
    teardown.add("cp-console-2", () => other.stop());
    const page = await openPage(`#token=${encodeURIComponent(other.token)}`, other.adminUrl);
    for (const dp of dataPlanes) {
      const row = page.locator(`tr[data-node-id="${dp.nodeId}"]`);
      await row.locator(`[data-replica]:text-is("${CONSOLE_REPLICA}")`).waitFor({
        timeout: SHOWN_WITHIN_MS,
      });
      expect(await row.getAttribute("data-state")).toBe("SYNCED");
      expect(Number(await row.locator("[data-applied]").textContent())).toBeGreaterThanOrEqual(
        version,
      );
    }
  });

  it("lists every resource of a kind longer than one page of the admin API", async () => {
    const { cp } = cluster;
    // More than the API's default page (100) and its largest (500): three pages to follow.
    const count = 520;
    await cp.admin.apply(
      Array.from({ length: count }, (_, i) => ({
        kind: "breaker",
        name: `many-${i}`,
        spec: { consecutiveFailures: 3 },
      })),
    );
    const { body: viewer } = await cp.admin.call<{ token: string }>("POST", "/v1/tokens", {
      name: "console-pages",
      role: "viewer",
    });
    const page = await openPage(`#token=${encodeURIComponent(viewer.token)}`);
    await page.getByRole("tab", { name: "Config" }).click();
    await page.getByLabel("Kind").selectOption("breakers");
    // The seed's breakers (trip, and the cluster's own) and the ones written here.
    const { body: first } = await cp.admin.call<{ remainingItemCount?: number; items: unknown[] }>(
      "GET",
      "/v1/breakers",
    );
    const total = first.items.length + (first.remainingItemCount ?? 0);
    expect(total).toBeGreaterThan(count);
    await page
      .locator(`.pager:has-text("(${total} breakers)")`)
      .waitFor({ timeout: SHOWN_WITHIN_MS });
  });

  it("refuses a wrong token with a clear message and keeps nothing", async () => {
    const page = await openPage("#token=not-the-token");
    const alert = page.getByRole("alert");
    await alert.waitFor({ timeout: SHOWN_WITHIN_MS });
    expect(await alert.textContent()).toContain("The control plane refused this token");
    expect(await page.getByLabel("Admin API token").isVisible()).toBe(true);
    expect(await page.evaluate("sessionStorage.length")).toBe(0);

    // The form refuses it the same way.
    await page.getByLabel("Admin API token").fill("still-wrong");
    await page.getByRole("button", { name: "Open console" }).click();
    await page.getByText("invalid bearer token").waitFor({ timeout: SHOWN_WITHIN_MS });
  });
});
