import { readdirSync, readFileSync } from "node:fs";

/** Kernel clock ticks per second for /proc times; 100 on every Linux this runs on. */
const TICKS_PER_SECOND = 100;

/** CPU ticks (user plus system) of each thread of `pid`, by "tid name". */
export function threadTicks(pid: number): Map<string, number> {
  const ticks = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks.set(`${tid} ${name}`, Number(fields[11]) + Number(fields[12]));
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return ticks;
}

/** CPU seconds a process used so far: all threads, its main thread, and the busiest other one. */
export interface ThreadCpu {
  total: number;
  /** The thread whose id is the process's: the event loop that serves requests. */
  main: number;
  /**
   * The busiest thread besides the main one. In a data plane that is the probe worker (its own
   * event loop); V8's helper threads (GC, compiling) each use less.
   */
  busiestOther: number;
}

/** Thread CPU of `pid` from /proc, as seconds since the process started. */
export function threadCpu(pid: number): ThreadCpu {
  let total = 0;
  let main = 0;
  let busiestOther = 0;
  for (const [thread, ticks] of threadTicks(pid)) {
    total += ticks;
    if (thread.startsWith(`${pid} `)) main = ticks;
    else busiestOther = Math.max(busiestOther, ticks);
  }
  return {
    total: total / TICKS_PER_SECOND,
    main: main / TICKS_PER_SECOND,
    busiestOther: busiestOther / TICKS_PER_SECOND,
  };
}
