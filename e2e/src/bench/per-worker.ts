import { availableParallelism } from "node:os";
import type { Measured } from "./report-table.js";

/**
 * BENCH_WORKERS as the data plane's `workers` value and the count it means: unset is 1, `auto`
 * one per CPU (what the data plane resolves it to on this machine).
 */
export function benchWorkers(text: string | undefined): { setting: string; count: number } {
  if (text === undefined || text.trim() === "") return { setting: "1", count: 1 };
  const trimmed = text.trim();
  if (trimmed === "auto") return { setting: "auto", count: availableParallelism() };
  if (!/^[0-9]+$/.test(trimmed) || Number(trimmed) < 1) {
    throw new Error(`BENCH_WORKERS must be a whole number of at least 1 or auto, got ${text}`);
  }
  return { setting: trimmed, count: Number(trimmed) };
}

/** One line under a table: the data plane's throughput divided among its proxy workers. */
export function perWorkerLine(rows: readonly Measured[], target: string, workers: number): string {
  const row = rows.find((measured) => measured.target === target);
  if (row === undefined) return `${target}: not measured`;
  const perWorker = row.result.requestsPerSecond / workers;
  return `${target}: ${workers} worker${workers === 1 ? "" : "s"}, ${perWorker.toFixed(0)} req/s per worker`;
}
