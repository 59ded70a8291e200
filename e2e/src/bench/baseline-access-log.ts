import { join } from "node:path";

/**
 * The baseline build's access log (BENCH_BASELINE_ACCESS_LOG): `off` (default), or `file`, to
 * a file in the bench's work dir like the `clawgate` data plane's, so a change to the log
 * itself is measured against the build before it, side by side.
 */
export function baselineAccessLog(dir: string): { setting: string; label: string } {
  const value = process.env.BENCH_BASELINE_ACCESS_LOG ?? "off";
  if (value === "off") return { setting: "off", label: "access log off" };
  if (value === "file") {
    return { setting: join(dir, "baseline-access.log"), label: "access log to a file" };
  }
  throw new Error(`BENCH_BASELINE_ACCESS_LOG must be off or file, got ${value}`);
}
