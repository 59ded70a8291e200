import { readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * `node e2e/dist/bench/profile-summary.js <dir> <target> [<target>...]`: reads the CPU profiles
 * bench:ab wrote with BENCH_PROFILE_DIR and prints, per target, CPU us per request by where the
 * time went (self time): node internals by module (_http_server, _http_outgoing, streams,
 * events, net), undici by file, Clawgate's own code by file, and V8's own (GC, program, idle
 * excluded), then the functions with the most self time; a column per target, side by side.
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [dir, ...targets] = process.argv.slice(2);
if (dir === undefined || targets.length === 0) {
  process.stderr.write("usage: profile-summary <dir> <target> [<target>...]\n");
  process.exit(2);
}

/** Where a frame's code lives, coarse enough to compare two processes. */
function area(url: string, name: string): string {
  if (url === "") return name === "(idle)" ? "(idle)" : `(v8) ${name || "(anonymous)"}`;
  const nodeInternal = /^node:(.*)$/.exec(url);
  if (nodeInternal !== null) return `node:${nodeInternal[1]}`;
  const undici = /node_modules\/undici\/(.*)$/.exec(url);
  if (undici !== null) return `undici/${undici[1]}`;
  const own = /\/(data-plane|runtime|proto|e2e)\/dist\/(.*)$/.exec(url);
  if (own !== null) return `${own[1]}/${own[2]}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  return pkg !== null ? `pkg ${pkg[1]}` : url;
}

const byArea = new Map<string, Map<string, number>>();
const byFunction = new Map<string, Map<string, number>>();
const perRequest = new Map<string, number>();
for (const target of targets) {
  const profile = JSON.parse(readFileSync(join(dir, `${target}.cpuprofile`), "utf8")) as Profile;
  const { requests } = JSON.parse(readFileSync(join(dir, `${target}.json`), "utf8")) as {
    requests: number;
  };
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  // Each sample's time is the delta to the next one.
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));
  }
  let busy = 0;
  for (const [id, micros] of self) {
    const { functionName, url, lineNumber } = nodes.get(id)!.callFrame;
    const where = area(url, functionName);
    if (where === "(idle)") continue;
    busy += micros;
    const perReq = micros / requests;
    add(byArea, where, target, perReq);
    add(byFunction, `${functionName || "(anonymous)"} ${where}:${lineNumber + 1}`, target, perReq);
  }
  perRequest.set(target, busy / requests);
}

function add(table: Map<string, Map<string, number>>, key: string, target: string, us: number) {
  let row = table.get(key);
  if (row === undefined) {
    row = new Map();
    table.set(key, row);
  }
  row.set(target, (row.get(target) ?? 0) + us);
}

function print(title: string, table: Map<string, Map<string, number>>, limit: number): void {
  const rows = [...table].sort(([, a], [, b]) => Math.max(...b.values()) - Math.max(...a.values()));
  process.stdout.write(
    `\n${title} (self CPU us/request)\n${targets.map((t) => t.padStart(10)).join(" ")}\n`,
  );
  for (const [key, row] of rows.slice(0, limit)) {
    const cells = targets.map((t) => (row.get(t) ?? 0).toFixed(2).padStart(10)).join(" ");
    process.stdout.write(`${cells}  ${key}\n`);
  }
}

process.stdout.write(
  `busy main-thread us/request: ${targets.map((t) => `${t} ${perRequest.get(t)!.toFixed(1)}`).join(", ")}\n`,
);
print("by area", byArea, 40);
print("by function", byFunction, Number(process.env.PROFILE_TOP ?? "60"));
