import { readFileSync } from "node:fs";

/** Kernel clock ticks per second for /proc times; 100 on every Linux this runs on. */
const TICKS_PER_SECOND = 100;

/** A process and, recursively, its children (nginx's workers are children of its master). */
export function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    try {
      const children = readFileSync(`/proc/${tree[i]}/task/${tree[i]}/children`, "utf8");
      for (const child of children.split(" ")) if (child.trim()) tree.push(Number(child));
    } catch {
      // The process ended between the two reads; it has no children to add.
    }
  }
  return tree;
}

/** User plus system CPU seconds the processes have used so far (every thread included). */
export function cpuSeconds(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which sits in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    ticks += Number(fields[11]) + Number(fields[12]); // utime, stime
  }
  return ticks / TICKS_PER_SECOND;
}

/** Resident memory of the processes, in MiB. */
export function residentMiB(pids: readonly number[]): number {
  let kib = 0;
  for (const pid of pids) {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    kib += Number(match?.[1] ?? 0);
  }
  return kib / 1024;
}
