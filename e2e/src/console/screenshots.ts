/**
 * `npm run screenshots`: starts a small cluster (etcd, control plane, two data planes, two
 * upstream nodes), kills one node so there is healing to show, and saves the console's views as
 * PNG files under docs/ for the README. Everything runs on 127.0.0.1 and stops at the end.
 */
import { mkdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { answer, startScriptedUpstream } from "../request-healing/scripted-upstream.js";
import { type ApplyResource, send, Teardown, waitFor } from "../support/index.js";
import { launchChromium } from "./browser.js";
import { startConsoleCluster } from "./console-cluster.js";

const DOCS = fileURLToPath(new URL("../../../docs/", import.meta.url));
const WAIT_MS = 20_000;

/** Resources beside the cluster's upstream "api": `failing` answers 500, so its breaker opens. */
const extra = (failing: string): ApplyResource[] => [
  { kind: "breaker", name: "strict", spec: { consecutiveFailures: 3, cooldownMs: 2_000 } },
  { kind: "breaker", name: "trip", spec: { minRequests: 4, cooldownMs: 60_000 } },
  { kind: "upstream", name: "failing", spec: { nodes: [{ address: failing }], breaker: "trip" } },
  {
    kind: "route",
    name: "failing",
    spec: { match: { pathPrefix: "/failing" }, upstream: "failing" },
  },
  { kind: "tenant", name: "acme", spec: { requestsPerMinute: 600 } },
  ...["users", "orders", "billing", "search"].map(
    (name): ApplyResource => ({
      kind: "route",
      name,
      spec: { match: { pathPrefix: `/${name}` }, upstream: "api" },
    }),
  ),
];

async function main(): Promise<void> {
  const teardown = new Teardown();
  try {
    const failing = await startScriptedUpstream(answer(500, "failing"));
    teardown.add("failing upstream", () => failing.close());
    const { cp, nodes, dataPlanes } = await startConsoleCluster(teardown, extra(failing.address));
    // A second version, so the Config view has a diff to show.
    await cp.admin.apply([
      {
        kind: "route",
        name: "search",
        spec: { match: { pathPrefix: "/search" }, upstream: "api", priority: 10 },
      },
      { kind: "tenant", name: "acme", spec: { requestsPerMinute: 1_200 } },
    ]);
    const browser = await launchChromium();
    teardown.add("chromium", () => browser.close());
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${cp.adminUrl}/ui/#token=${encodeURIComponent(cp.token)}`);
    await page.getByText("Live", { exact: true }).waitFor({ timeout: WAIT_MS });

    await page.getByRole("tab", { name: "Upstreams" }).click();
    const victim = nodes[0]!;
    await page
      .locator(`tr[data-node="${victim.address}"][data-majority="healthy"]`)
      .waitFor({ timeout: WAIT_MS });
    await victim.process.kill();
    const evicted = page.locator(`tr[data-node="${victim.address}"][data-majority="evicted"]`);
    await evicted.waitFor({ timeout: WAIT_MS });
    // One data plane's breaker of `failing` opens on its 500s.
    const tripping = dataPlanes[0]!;
    await waitFor(async () => (await send(`${tripping.proxyUrl}/failing/x`)).status === 503, {
      what: "the breaker of upstream failing to open",
      timeoutMs: WAIT_MS,
    });
    await page
      .locator(`article[data-upstream="failing"] li[data-state="open"]`)
      .waitFor({ timeout: WAIT_MS });

    await mkdir(DOCS, { recursive: true });
    await page.getByRole("tab", { name: "Fleet" }).click();
    await page.locator("#dataplanes tbody tr").nth(1).waitFor({ timeout: WAIT_MS });
    await page.screenshot({ path: `${DOCS}console-fleet.png`, fullPage: true });

    await page.getByRole("tab", { name: "Upstreams" }).click();
    await evicted.getByRole("button").click();
    await page.locator(".detail li.event").first().waitFor({ timeout: WAIT_MS });
    await page.screenshot({ path: `${DOCS}console-upstreams.png`, fullPage: true });

    await page.getByRole("tab", { name: "Journal" }).click();
    await page.locator(".timeline li.event").first().waitFor({ timeout: WAIT_MS });
    await page.screenshot({ path: `${DOCS}console-journal.png`, fullPage: true });

    await page.getByRole("tab", { name: "Config" }).click();
    await page.locator("#resources tbody tr").first().waitFor({ timeout: WAIT_MS });
    await page.getByRole("button", { name: "Compare" }).click();
    await page.locator(".changes li").first().waitFor({ timeout: WAIT_MS });
    await page.screenshot({ path: `${DOCS}console-config.png`, fullPage: true });

    // A phone: the same Fleet view at 390 px wide.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole("tab", { name: "Fleet" }).click();
    await page.locator("#dataplanes tbody tr").first().waitFor({ timeout: WAIT_MS });
    await page.screenshot({ path: `${DOCS}console-fleet-phone.png`, fullPage: true });
    console.log(`screenshots written to ${DOCS}`);
  } finally {
    await teardown.run();
  }
}

await main();
