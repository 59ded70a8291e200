import { copyFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { create, SnapshotSchema } from "@clawgate/proto";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { UpstreamTlsWatch } from "./upstream-tls-watch.js";

function compiledWith(caFile: string): CompiledSnapshot {
  const result = compileSnapshot(
    create(SnapshotSchema, {
      version: 1n,
      upstreams: [
        {
          name: "api",
          nodes: [{ address: "127.0.0.1:443", weight: 1 }],
          tls: { enabled: true, caFile },
        },
      ],
      routes: [{ name: "r", match: { pathPrefix: "/" }, upstream: "api" }],
    }),
  );
  if (!result.ok) throw new Error(result.reason);
  return result.value;
}

/** Lets queued microtasks and immediates run: what the watch defers runs before this resolves. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

// A snapshot compiled across turns reads its files early. A renewal seen while it compiles is
// reloaded on the snapshot then served; when the older compile is swapped in after that, its
// old files would serve on for good (the file does not change again), unless its swap notices.
describe("a TLS file change during a compile", () => {
  let pki: TestPki;
  let watch: UpstreamTlsWatch | undefined;
  beforeAll(async () => {
    pki = await makeTestPki();
  });
  afterEach(() => watch?.close());
  afterAll(() => pki.remove());

  it("is reloaded again when a snapshot that read the old file is swapped in after it", async () => {
    const caFile = join(pki.dir, "watched-ca.pem");
    copyFileSync(pki.caCert, caFile);
    const changes: string[][] = [];
    let changed: () => void = () => {};
    watch = new UpstreamTlsWatch({
      pollIntervalMs: 10,
      onChange: (upstreams) => {
        changes.push([...upstreams]);
        changed();
      },
    });
    const served = compiledWith(caFile);
    watch.sync(undefined, served);
    // The compile of the next version reads the file now, before the renewal lands.
    const readEarly = compiledWith(caFile);

    const seen = new Promise<void>((resolve) => (changed = resolve));
    const renew = () => {
      copyFileSync(pki.otherCaCert, `${caFile}.new`);
      renameSync(`${caFile}.new`, caFile);
    };
    // fs.watchFile takes its baseline at its first poll, later on a busy machine: a renewal
    // landing before it is that baseline, not a change. Renew until the watch reports one.
    renew();
    const again = setInterval(renew, 100);
    await seen.finally(() => clearInterval(again));
    // The reload the change asked for, on the snapshot served: it reads the renewed file.
    const reloaded = compiledWith(caFile);
    watch.sync(served, reloaded);
    await settled();
    expect(changes).toEqual([["api"]]);

    // The early compile is swapped in last: it must not keep the old CA without a word.
    watch.sync(reloaded, readEarly);
    await settled();
    expect(changes).toEqual([["api"], ["api"]]);
  });
});
