import { readFileSync } from "node:fs";

/** The `version` of the package.json at `url`: what `--version` prints and Hello reports. */
export function packageVersion(url: URL): string {
  const version: unknown = JSON.parse(readFileSync(url, "utf8")).version;
  if (typeof version !== "string") throw new Error(`${url.pathname} has no version`);
  return version;
}
