import { readFile, rm } from "node:fs/promises";
import { ManagedProcess } from "../support/managed-process.js";
import { parseH2loadOutput } from "./h2load-output.js";
import type { WrkResult } from "./wrk-output.js";

/** h2load binary (Debian's nghttp2-client); default h2load from PATH. */
const H2LOAD_BIN = process.env.H2LOAD_BIN ?? "h2load";

export interface H2loadOptions {
  /** HTTP/2 connections. */
  clients: number;
  /** Streams in flight on each connection. */
  streams: number;
  /** Seconds of measured load. */
  durationSeconds: number;
  /** Where the per-request log goes (removed once read). */
  logFile: string;
}

/**
 * Runs h2load against an https:// URL (ALPN h2; h2load does not check the certificate) for a
 * fixed time on one thread, leaving the other core to the server under test, as the wrk runs do.
 * A non-zero exit throws with the output.
 */
export async function runH2load(url: string, options: H2loadOptions): Promise<WrkResult> {
  const h2load = await ManagedProcess.spawn({
    name: "h2load",
    command: H2LOAD_BIN,
    args: [
      "-t1",
      `-c${options.clients}`,
      `-m${options.streams}`,
      `-D${options.durationSeconds}`,
      `--log-file=${options.logFile}`,
      url,
    ],
  });
  const status = await h2load.exited;
  const output = h2load.output.text(200);
  if (status.code !== 0) throw new Error(`h2load against ${url} failed:\n${output}`);
  try {
    return parseH2loadOutput(output, await readFile(options.logFile, "utf8"));
  } finally {
    await rm(options.logFile, { force: true });
  }
}
