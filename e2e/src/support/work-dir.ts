import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh directory under the OS temp dir, e.g. /tmp/clawgate-cp-a1B2c3. */
export function makeWorkDir(label: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `clawgate-${label}-`));
}

export function removeWorkDir(path: string): Promise<void> {
  return rm(path, { recursive: true, force: true });
}
