import { once } from "node:events";
import { connect } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { buildAdminApp } from "../admin/app.js";
import { TokenStore } from "../auth/token-store.js";
import { Fleet } from "../fleet/fleet.js";
import { FleetHealth } from "../health/fleet-health.js";
import { Journal } from "../journal/journal.js";
import { ConfigService } from "../resources/config-service.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { LiveFeed } from "./live-feed.js";
import { LIVE_PATH, liveRoutes } from "./live-routes.js";

const PREFIX = "/clawgate/";
const BOOTSTRAP = "live-bootstrap-token-0123456789";

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

function status(publishedVersion: number | null): SnapshotStatus {
  return {
    version: publishedVersion ?? 0,
    published: publishedVersion !== null,
    publishedVersion,
    counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
  };
}

/** A control plane's admin app with a real fleet, health view, journal and token store. */
async function controlPlane() {
  const store = await openEmbeddedStore({});
  cleanup.push(() => store.close());
  const tokens = new TokenStore({ store, prefix: PREFIX, bootstrapToken: BOOTSTRAP });
  await tokens.start();
  cleanup.push(() => tokens.stop());
  const viewer = await tokens.create("console", "viewer", [], undefined);
  if (!viewer.ok) throw new Error("could not create the viewer token");
  let published: number | null = null;
  const snapshot = { status: () => status(published) };
  const fleet = new Fleet();
  const journal = new Journal({ store, prefix: PREFIX });
  const health = new FleetHealth({ fleet, journal });
  cleanup.push(() => health.close());
  const feed = new LiveFeed({ snapshot, fleet, health, journal });
  const app = await buildAdminApp({
    config: new ConfigService(store, PREFIX),
    snapshot,
    fleet,
    tokens,
    journal,
    live: feed,
  });
  cleanup.push(() => app.close());
  await app.listen({ host: "127.0.0.1", port: 0 });
  const publish = (version: number) => {
    published = version;
    fleet.setPublished(version);
  };
  return { app, url: baseUrl(app), fleet, feed, publish, viewerToken: viewer.token };
}

function baseUrl(app: FastifyInstance): string {
  const address = app.server.address();
  if (address === null || typeof address === "string") throw new Error("not listening");
  return `http://127.0.0.1:${address.port}`;
}

interface Frame {
  event: string;
  data: unknown;
}

/** Reads server-sent events as the console does: fetch with the token, a stream reader. */
async function follow(url: string, token: string) {
  const abort = new AbortController();
  cleanup.push(() => abort.abort());
  const response = await fetch(`${url}${LIVE_PATH}`, {
    headers: { authorization: `Bearer ${token}` },
    signal: abort.signal,
  });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  const comments: string[] = [];
  /** Resolves with the first event (after those already read) `accept` takes. */
  async function next(accept: (frame: Frame) => boolean): Promise<Frame> {
    for (;;) {
      let end = buffered.indexOf("\n\n");
      while (end !== -1) {
        const text = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const event = /^event: (.*)$/m.exec(text)?.[1];
        const data = /^data: (.*)$/m.exec(text)?.[1];
        if (event !== undefined && data !== undefined) {
          const frame = { event, data: JSON.parse(data) as unknown };
          if (accept(frame)) return frame;
        } else {
          comments.push(text);
        }
        end = buffered.indexOf("\n\n");
      }
      const { value, done } = await reader.read();
      if (done) throw new Error("the live stream ended");
      buffered += value;
    }
  }
  return { response, next, comments, close: () => abort.abort() };
}

const hello = { hostname: "dp-host", softwareVersion: "1.0.0", lastAppliedVersion: 0 };

describe("GET /v1/live", () => {
  it("refuses a missing or wrong token with 401 and sends no stream", async () => {
    const cp = await controlPlane();
    const missing = await fetch(`${cp.url}${LIVE_PATH}`);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ error: { code: "CLAWGATE_UNAUTHORIZED" } });
    const wrong = await fetch(`${cp.url}${LIVE_PATH}`, {
      headers: { authorization: "Bearer not-the-token" },
    });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({
      error: { code: "CLAWGATE_UNAUTHORIZED", message: "invalid bearer token" },
    });
    expect(cp.feed.size).toBe(0);
  });

  it("pushes publishes, data-plane changes, verdicts and heal events to a viewer token", async () => {
    const cp = await controlPlane();
    const live = await follow(cp.url, cp.viewerToken);
    expect(live.response.status).toBe(200);
    expect(live.response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(live.response.headers.get("cache-control")).toBe("no-store");
    // Subscribed once the headers are out: from here on every change is pushed.
    expect(cp.feed.size).toBe(1);

    cp.publish(7);
    expect((await live.next((f) => f.event === "snapshot")).data).toMatchObject({
      publishedVersion: 7,
    });

    const stream = cp.fleet.connected("dp-1", hello);
    expect((await live.next((f) => f.event === "dataplane")).data).toMatchObject({
      nodeId: "dp-1",
      state: "SYNCING",
      appliedVersion: 0,
    });
    cp.fleet.acked("dp-1", 7);
    expect((await live.next((f) => f.event === "dataplane")).data).toMatchObject({
      nodeId: "dp-1",
      state: "SYNCED",
      appliedVersion: 7,
    });

    const node = (state: string) => ({
      upstream: "api",
      address: "127.0.0.1:9001",
      state,
      evidence: state === "evicted" ? "2 probes failed: connection refused" : "",
      changedAtMs: Date.now(),
    });
    cp.fleet.healthReported("dp-1", stream, [node("healthy")]);
    cp.fleet.healthReported("dp-1", stream, [node("evicted")]);
    // The first report makes the node healthy (it was unreported), the second evicts it.
    const verdict = await live.next(
      (f) => f.event === "verdict" && (f.data as { majority: string }).majority !== "healthy",
    );
    expect(verdict.data).toMatchObject({
      upstream: "api",
      address: "127.0.0.1:9001",
      majority: "evicted",
      evicted: 1,
      total: 1,
    });
    const heal = await live.next((f) => f.event === "heal");
    expect(heal.data).toMatchObject({
      upstream: "api",
      node: "127.0.0.1:9001",
      action: "evict",
      evidence: "2 probes failed: connection refused",
      source: "dp-1",
    });
  });

  it("sends heartbeats while nothing changes, and unsubscribes when the client leaves", async () => {
    const fleet = new Fleet();
    const feed = new LiveFeed({ snapshot: { status: () => status(null) }, fleet });
    const app = Fastify();
    cleanup.push(() => app.close());
    await app.register(liveRoutes, { feed, heartbeatMs: 20 });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const live = await follow(baseUrl(app), "unused");
    // Waits for two heartbeats by asking for an event that never comes until they are read.
    const heartbeats = async () => {
      while (live.comments.filter((c) => c === ": heartbeat").length < 2) {
        fleet.connected("probe", hello);
        await live.next((f) => f.event === "dataplane");
      }
    };
    await heartbeats();
    expect(feed.size).toBe(1);
    live.close();
    await waitUntil(() => feed.size === 0);
  });

  it("drops a client that does not read, instead of buffering for it without bound", async () => {
    const fleet = new Fleet();
    const feed = new LiveFeed({ snapshot: { status: () => status(null) }, fleet });
    const app = Fastify();
    cleanup.push(() => app.close());
    await app.register(liveRoutes, { feed, maxBufferedBytes: 64 * 1024 });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const port = new URL(baseUrl(app)).port;

    // A client that sends its request and then never reads a byte.
    const socket = connect(Number(port), "127.0.0.1");
    cleanup.push(() => socket.destroy());
    await once(socket, "connect");
    socket.pause();
    socket.write(`GET ${LIVE_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    await waitUntil(() => feed.size === 1);
    const closed = once(socket, "close");

    // Big events (a 16 KiB hostname each) until the kernel's buffers and then ours fill up.
    const big = { ...hello, hostname: "h".repeat(16 * 1024) };
    let sent = 0;
    while (feed.size > 0) {
      fleet.connected(`dp-${sent++}`, big);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(feed.size).toBe(0);
    // Reading again, the client finds its connection closed by the server.
    socket.on("error", () => {});
    socket.resume();
    await closed;
    // A reading client still gets its events after the slow one is gone.
    const live = await follow(baseUrl(app), "unused");
    fleet.connected("after", hello);
    expect((await live.next((f) => f.event === "dataplane")).data).toMatchObject({
      nodeId: "after",
    });
  });
});

/** Polls `check` on each turn of the event loop until it holds (the test's timeout bounds it). */
async function waitUntil(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
}
