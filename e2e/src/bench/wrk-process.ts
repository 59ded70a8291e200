import { ManagedProcess } from "../support/managed-process.js";
import { parseWrkOutput, type WrkResult } from "./wrk-output.js";

/** wrk binary; default wrk from PATH. */
const WRK_BIN = process.env.WRK_BIN ?? "wrk";

export interface WrkOptions {
  connections: number;
  /** wrk duration, e.g. "10s". */
  duration: string;
  /** wrk threads; default 1, leaving the other core to the server under test. */
  threads?: number;
  /** A wrk Lua script (-s), for a method or body other than GET. */
  script?: string;
}

/** Runs wrk against `url` and parses its report; a non-zero exit throws with the output. */
export async function runWrk(url: string, options: WrkOptions): Promise<WrkResult> {
  const wrk = await ManagedProcess.spawn({
    name: "wrk",
    command: WRK_BIN,
    args: [
      `-t${options.threads ?? 1}`,
      `-c${options.connections}`,
      `-d${options.duration}`,
      "--latency",
      ...(options.script === undefined ? [] : ["-s", options.script]),
      url,
    ],
  });
  const status = await wrk.exited;
  const output = wrk.output.text(200);
  if (status.code !== 0) throw new Error(`wrk against ${url} failed:\n${output}`);
  return parseWrkOutput(output);
}
