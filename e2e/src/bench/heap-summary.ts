import { readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * `node e2e/dist/bench/heap-summary.js <dir> <target> [<target>...]`: reads the sampling heap
 * profiles bench:ab wrote with BENCH_PROFILE_DIR and BENCH_PROFILE_KIND=heap and prints, per
 * target, the bytes allocated per request by allocating function (self), side by side.
 */
interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

const [dir, ...targets] = process.argv.slice(2);
if (dir === undefined || targets.length === 0) {
  process.stderr.write("usage: heap-summary <dir> <target> [<target>...]\n");
  process.exit(2);
}

const table = new Map<string, Map<string, number>>();
const totals = new Map<string, number>();
for (const target of targets) {
  const profile = JSON.parse(readFileSync(join(dir, `${target}.heapprofile`), "utf8")) as {
    head: HeapNode;
  };
  const { requests } = JSON.parse(readFileSync(join(dir, `${target}.json`), "utf8")) as {
    requests: number;
  };
  let total = 0;
  const walk = (node: HeapNode, parent: string): void => {
    const { functionName, url, lineNumber } = node.callFrame;
    const short = url.replace(/^.*\/(node_modules|dist)\//, "");
    const name = `${functionName || "(anonymous)"} ${short}:${lineNumber + 1}`;
    // V8's own frames say little; name them by their JS caller.
    const key = url === "" ? `${name} <- ${parent}` : name;
    if (node.selfSize > 0) {
      let row = table.get(key);
      if (row === undefined) {
        row = new Map();
        table.set(key, row);
      }
      row.set(target, (row.get(target) ?? 0) + node.selfSize / requests);
      total += node.selfSize / requests;
    }
    for (const child of node.children) walk(child, url === "" ? parent : name);
  };
  walk(profile.head, "(root)");
  totals.set(target, total);
}

process.stdout.write(
  `sampled B/request: ${targets.map((t) => `${t} ${totals.get(t)!.toFixed(0)}`).join(", ")}\n`,
);
const rows = [...table].sort(([, a], [, b]) => Math.max(...b.values()) - Math.max(...a.values()));
for (const [key, row] of rows.slice(0, Number(process.env.PROFILE_TOP ?? "60"))) {
  const cells = targets.map((t) => (row.get(t) ?? 0).toFixed(0).padStart(8)).join(" ");
  process.stdout.write(`${cells}  ${key}\n`);
}
