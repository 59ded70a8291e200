import { createServer } from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import { threadId, Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import type { ProbeResult, ProbeTarget } from "./probe-protocol.js";
import { ProbeWorker } from "./probe-worker-client.js";

/** Collects results and lets a test wait for one that matches, never sleeping. */
class Results {
  readonly all: ProbeResult[] = [];
  private waiters: { match: (r: ProbeResult) => boolean; resolve: (r: ProbeResult) => void }[] = [];

  readonly push = (result: ProbeResult): void => {
    this.all.push(result);
    this.waiters = this.waiters.filter((w) => {
      if (!w.match(result)) return true;
      w.resolve(result);
      return false;
    });
  };

  next(match: (r: ProbeResult) => boolean = () => true): Promise<ProbeResult> {
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }
}

const workers: ProbeWorker[] = [];
const closers: (() => void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) close();
  await Promise.all(workers.splice(0).map((w) => w.close()));
});

function start(): { worker: ProbeWorker; results: Results } {
  const results = new Results();
  const worker = new ProbeWorker({ onResults: (batch) => batch.forEach(results.push) });
  workers.push(worker);
  return { worker, results };
}

async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A TCP server on its own thread that counts the connections it accepts into shared memory, so
 * the main thread can watch the count even while its own event loop is blocked.
 */
async function countingServer(): Promise<{ port: number; accepted: () => number }> {
  const counter = new Int32Array(new SharedArrayBuffer(4));
  const thread = new Worker(
    `const { createServer } = require("node:net");
     const { workerData, parentPort } = require("node:worker_threads");
     const server = createServer((socket) => {
       Atomics.add(workerData.counter, 0, 1);
       socket.destroy();
     });
     server.listen(0, "127.0.0.1", () => parentPort.postMessage(server.address().port));`,
    { eval: true, workerData: { counter } },
  );
  closers.push(() => void thread.terminate());
  const port = await new Promise<number>((resolve, reject) => {
    thread.once("message", resolve);
    thread.once("error", reject);
  });
  return { port, accepted: () => Atomics.load(counter, 0) };
}

function target(port: number, overrides: Partial<ProbeTarget> = {}): ProbeTarget {
  return {
    upstream: "agents",
    address: `127.0.0.1:${port}`,
    host: "127.0.0.1",
    port,
    intervalMs: 50,
    timeoutMs: 1_000,
    path: "",
    expectStatus: "",
    ...overrides,
  };
}

describe("ProbeWorker", () => {
  it("runs probes on another thread and posts their results", async () => {
    const server = createServer((_req, res) => res.end(JSON.stringify({ status: "ok" })));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(() => server.close());
    const port = (server.address() as AddressInfo).port;
    const { worker, results } = start();
    worker.setTargets([target(port, { path: "/healthz", expectStatus: "ok" })]);

    const result = await results.next();
    expect(worker.threadId).toBeGreaterThan(0);
    expect(worker.threadId).not.toBe(threadId);
    expect(result).toMatchObject({
      type: "result",
      upstream: "agents",
      address: `127.0.0.1:${port}`,
      ok: true,
      evidence: { httpStatus: 200, bodyStatus: "ok" },
      ticket: 0,
    });
  });

  it("posts the probes that end in the same turn of the worker together, not one message each", async () => {
    const port = await closedPort();
    const batches: number[] = [];
    const all: ProbeResult[] = [];
    let resolveAll: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      resolveAll = resolve;
    });
    const worker = new ProbeWorker({
      onResults: (batch) => {
        batches.push(batch.length);
        all.push(...batch);
        if (all.length >= 200) resolveAll();
      },
    });
    workers.push(worker);
    // 200 nodes refused at once (an interval of an hour: only probe-now probes them here).
    const targets = Array.from({ length: 200 }, (_, i) =>
      target(port, { upstream: `u-${i}`, intervalMs: 3_600_000 }),
    );
    worker.setTargets(targets);
    for (const t of targets) worker.probeNow(t.upstream, t.address, 1);
    await done;

    expect(new Set(all.map((r) => r.upstream)).size).toBe(200);
    expect(all.every((r) => !r.ok && r.evidence.error === "ECONNREFUSED")).toBe(true);
    // Refusals arrive together on the worker's loop: far fewer messages than probes.
    expect(batches.length).toBeLessThan(50);
  });

  it("keeps probing while the main thread is blocked", async () => {
    const upstream = await countingServer();
    const { worker, results } = start();
    worker.setTargets([target(upstream.port, { intervalMs: 20 })]);
    await results.next();

    // Busy: the main loop cannot run a timer or read a socket until the upstream has seen three
    // more probes. A prober sharing this loop would never make them; the guard only keeps such
    // a failure from hanging the run, it is not a timing assertion.
    const before = upstream.accepted();
    const guard = Date.now() + 30_000;
    let seen = before;
    while (seen < before + 3 && Date.now() < guard) seen = upstream.accepted();
    expect(seen - before, "probes made while the main thread was blocked").toBeGreaterThanOrEqual(
      3,
    );

    // Their results were posted meanwhile and are delivered once the loop is free again.
    const mark = results.all.length;
    await results.next();
    expect(results.all.slice(mark).every((r) => r.ok)).toBe(true);
  });

  it("probes at once on request and tags the result with the ticket", async () => {
    const port = await closedPort();
    const { worker, results } = start();
    // First probe within 1 s, the next not before 9 s: a quick second result is the request's.
    worker.setTargets([target(port, { intervalMs: 10_000 })]);
    await results.next();
    worker.probeNow("agents", `127.0.0.1:${port}`, 42);
    // The next result is the requested one (it carries the ticket), not the 10 s tick's.
    const result = await results.next();
    expect(result).toMatchObject({ ok: false, ticket: 42 });
  });

  it("stops probing nodes removed from the targets", async () => {
    const gone = await closedPort();
    const kept = await closedPort();
    const { worker, results } = start();
    worker.setTargets([target(gone), target(kept)]);
    await results.next((r) => r.address.endsWith(`:${gone}`));
    worker.setTargets([target(kept)]);
    // Messages are ordered: once two results of `kept` arrive after the change was sent, any
    // probe of `gone` in flight at that moment has been dropped or delivered.
    const mark = results.all.length;
    await results.next((r) => r.address.endsWith(`:${kept}`));
    await results.next((r) => r.address.endsWith(`:${kept}`));
    await results.next((r) => r.address.endsWith(`:${kept}`));
    const after = results.all.slice(mark).filter((r) => r.address.endsWith(`:${gone}`));
    expect(after.length).toBeLessThanOrEqual(1);
  });
});

describe("ProbeWorker restarts", () => {
  it("restarts a worker that died and tells onError", async () => {
    const errors: Error[] = [];
    let told: () => void = () => {};
    const twice = new Promise<void>((resolve) => {
      told = resolve;
    });
    const worker = new ProbeWorker({
      onResults: () => {},
      onError: (err) => {
        errors.push(err);
        // error + exit of the first worker, then of the restarted one.
        if (errors.length >= 4) told();
      },
      restartDelayMs: 10,
      url: new URL(`data:text/javascript,${encodeURIComponent("throw new Error('boom')")}`),
    });
    workers.push(worker);
    await twice;
    expect(errors.map((e) => e.message)).toEqual([
      "boom",
      "probe worker exited with code 1; restarting",
      "boom",
      "probe worker exited with code 1; restarting",
    ]);
  });
});
