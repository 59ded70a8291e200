import { closeSync, copyFileSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import { create, SnapshotSchema } from "@clawgate/proto";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { currentFileStatKey } from "../file-watch/file-stat-key.js";
import { StableFilePoll } from "../file-watch/stable-file-poll.js";
import { UpstreamTlsWatch } from "./upstream-tls-watch.js";

interface TlsFiles {
  caFile?: string;
  clientCertFile?: string;
  clientKeyFile?: string;
}

function compile(files: TlsFiles, upstreams = 1) {
  return compileSnapshot(
    create(SnapshotSchema, {
      version: 1n,
      upstreams: Array.from({ length: upstreams }, (_, i) => ({
        name: i === 0 ? "api" : `api-${i}`,
        nodes: [{ address: "127.0.0.1:443", weight: 1 }],
        tls: { enabled: true, ...files },
      })),
      routes: [{ name: "r", match: { pathPrefix: "/" }, upstream: "api" }],
    }),
  );
}

function compiledWith(files: TlsFiles, upstreams = 1): CompiledSnapshot {
  const result = compile(files, upstreams);
  if (!result.ok) throw new Error(result.reason);
  return result.value;
}

/** The CA bundle the live snapshot's "api" pools verify nodes with. */
function caOf(snapshot: CompiledSnapshot): string | undefined {
  return snapshot.upstreams.get("api")?.tls?.probe.files.ca;
}

/** A poll that runs only when the test says so: no timer, no waiting on intervals. */
const pollByHand = (statKey?: (path: string) => string | undefined) =>
  new StableFilePoll({ schedule: () => () => {}, ...(statKey === undefined ? {} : { statKey }) });

describe("the upstream TLS watch", () => {
  let pki: TestPki;
  let watch: UpstreamTlsWatch | undefined;
  let n = 0;
  /** A fresh copy of `from` the test may rewrite. */
  const copyOf = (from: string) => {
    const path = join(pki.dir, `watched-${++n}.pem`);
    copyFileSync(from, path);
    return path;
  };
  const renameOver = (from: string, path: string) => {
    copyFileSync(from, `${path}.new`);
    renameSync(`${path}.new`, path);
  };
  beforeAll(async () => {
    pki = await makeTestPki();
  });
  afterEach(() => watch?.close());
  afterAll(() => pki.remove());

  it("never serves a CA bundle rewritten in place from between its writes", () => {
    const caFile = copyOf(pki.caCert);
    const first = readFileSync(pki.otherCaCert, "utf8");
    const second = readFileSync(pki.caCert, "utf8");
    const poll = pollByHand();
    const servedCas: (string | undefined)[] = [];
    let live = compiledWith({ caFile });
    // What main does on a change: compile the served snapshot again and swap it in.
    watch = new UpstreamTlsWatch({
      poll,
      onChange: () => {
        const previous = live;
        live = compiledWith({ caFile });
        servedCas.push(caOf(live));
        watch?.sync(previous, live);
      },
    });
    watch.sync(undefined, live);
    poll.poll();

    // `cat other-ca.pem ca.pem > ca.pem`: truncated, then written in two writes, polled between.
    const fd = openSync(caFile, "w");
    writeSync(fd, first);
    poll.poll();
    writeSync(fd, second);
    closeSync(fd);
    poll.poll();
    // The half bundle (other CA alone) is valid PEM: it must never have been loaded.
    expect(servedCas).toEqual([]);
    expect(caOf(live)).toBe(second);
    poll.poll();
    expect(servedCas).toEqual([first + second]);
    poll.poll();
    expect(servedCas).toEqual([first + second]);
  });

  it("reloads a renewal made between the read and the watch's first poll", () => {
    const caFile = copyOf(pki.caCert);
    const poll = pollByHand();
    const changes: string[][] = [];
    watch = new UpstreamTlsWatch({ poll, onChange: (upstreams) => changes.push([...upstreams]) });
    const compiled = compiledWith({ caFile });
    renameOver(pki.otherCaCert, caFile);
    watch.sync(undefined, compiled);
    poll.poll();
    poll.poll();
    expect(changes).toEqual([["api"]]);
  });

  it("keeps the last good context when a client certificate is cut short, asking once", () => {
    const clientCertFile = copyOf(pki.clientCert);
    const clientKeyFile = copyOf(pki.clientKey);
    const files = { caFile: pki.caCert, clientCertFile, clientKeyFile };
    const poll = pollByHand();
    let live = compiledWith(files);
    const context = live.upstreams.get("api")?.tls?.secureContext;
    const refusals: string[] = [];
    watch = new UpstreamTlsWatch({
      poll,
      onChange: () => {
        const result = compile(files);
        if (result.ok) live = result.value;
        else refusals.push(result.reason);
      },
    });
    watch.sync(undefined, live);
    const pem = readFileSync(pki.clientCert, "utf8");
    const fd = openSync(clientCertFile, "w");
    writeSync(fd, pem.slice(0, pem.length / 2));
    closeSync(fd);
    for (let i = 0; i < 4; i++) poll.poll();
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toContain(clientCertFile);
    expect(refusals[0]).not.toContain(pem.slice(100, 140));
    expect(live.upstreams.get("api")?.tls?.secureContext).toBe(context);
  });

  // A snapshot compiled across turns reads its files early. A renewal seen while it compiles is
  // reloaded on the snapshot then served; when the older compile is swapped in after that, its
  // old files would serve on for good (the file does not change again), unless its swap notices.
  it("reloads again when a snapshot that read the old file is swapped in after the reload", () => {
    const caFile = copyOf(pki.caCert);
    const poll = pollByHand();
    const changes: string[][] = [];
    watch = new UpstreamTlsWatch({ poll, onChange: (upstreams) => changes.push([...upstreams]) });
    const served = compiledWith({ caFile });
    watch.sync(undefined, served);
    // The compile of the next version reads the file now, before the renewal lands.
    const readEarly = compiledWith({ caFile });
    renameOver(pki.otherCaCert, caFile);
    poll.poll();
    poll.poll();
    expect(changes).toEqual([["api"]]);
    // The reload the change asked for, on the snapshot served: it reads the renewed file.
    const reloaded = compiledWith({ caFile });
    watch.sync(served, reloaded);
    poll.poll();
    expect(changes).toEqual([["api"]]);

    // The early compile is swapped in last: it must not keep the old CA without a word.
    watch.sync(reloaded, readEarly);
    poll.poll();
    expect(changes).toEqual([["api"], ["api"]]);
  });

  it("stats each distinct file once a poll, however many upstreams name it", () => {
    const caFile = copyOf(pki.caCert);
    const stats: string[] = [];
    const poll = pollByHand((path) => {
      stats.push(path);
      return currentFileStatKey(path);
    });
    watch = new UpstreamTlsWatch({ poll, onChange: () => {} });
    watch.sync(undefined, compiledWith({ caFile }, 300));
    poll.poll();
    expect(stats).toEqual([caFile]);
    expect(watch.paths()).toEqual([caFile]);
  });
});
