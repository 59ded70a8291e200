import { pathToFileURL } from "node:url";
import { type CompiledSnapshot, compileSnapshot } from "@clawgate/data-plane";
import { create, SnapshotSchema } from "@clawgate/proto";
import { type Request, routeShape } from "./scale-config.js";

export interface RouteMatchResult {
  routes: number;
  /** Median over the measured rounds. */
  nsPerMatch: number;
}

const REQUESTS = 1_000;
const ROUNDS = 9;

/**
 * Nanoseconds per RouteTable.match on tables of `sizes` routes shaped as bench:scale makes
 * them (exact paths, shared prefixes, exact and wildcard hosts), for requests that reach
 * routes spread over each table plus one in ten that match nothing. Every size gets the same
 * request mix, and the sizes take turns round by round, so a neighbour thrashing the CPU
 * caches for a while slows each size alike instead of one of them; each figure is the median
 * of its rounds (the process's CPU time) after one warm-up round per size (the JIT has then
 * seen every table).
 */
export function measureRouteMatch(
  sizes: readonly number[],
  matchesPerRound = 1_000_000,
): RouteMatchResult[] {
  const benches = sizes.map((routes) => ({ routes, ...prepare(routes), samples: [] as number[] }));
  const headers = {};
  let found = 0;
  for (let round = 0; round <= ROUNDS; round++) {
    for (const bench of benches) {
      const { table, requests } = bench;
      // CPU time, not elapsed time: on a shared machine the process is descheduled for whole
      // time slices, which elapsed time would count as matching.
      const start = process.cpuUsage();
      for (let m = 0; m < matchesPerRound; m++) {
        const request = requests[m % REQUESTS]!;
        if (table.match("GET", request.host, request.path, headers) !== undefined) found++;
      }
      const used = process.cpuUsage(start);
      const ns = ((used.user + used.system) * 1_000) / matchesPerRound;
      if (round > 0) bench.samples.push(ns); // round 0 warms the JIT up
    }
  }
  if (found === 0) throw new Error("no request matched");
  return benches.map(({ routes, samples }) => ({ routes, nsPerMatch: median(samples) }));
}

/** The compiled table of `routes` routes and the requests to match against it. */
function prepare(routes: number): { table: CompiledSnapshot; requests: Request[] } {
  const shapes = Array.from({ length: routes }, (_, i) => routeShape(i, 1));
  const compiled = compileSnapshot(
    create(SnapshotSchema, {
      version: 1n,
      upstreams: [{ name: "u-0", nodes: [{ address: "127.0.0.1:9", weight: 1 }] }],
      routes: shapes.map(({ request: _request, ...route }) => ({
        name: route.name,
        upstream: route.upstream,
        match: {
          path: route.path ?? "",
          pathPrefix: route.pathPrefix ?? "",
          hosts: route.hosts ?? [],
        },
      })),
    }),
  );
  if (!compiled.ok) throw new Error(`the generated routes do not compile: ${compiled.reason}`);
  const table = compiled.value;
  const requests: Request[] = [];
  for (let r = 0; r < REQUESTS; r++) {
    // Spread over the table, but every size gets the same mix of route shapes (shape i % 10,
    // one in ten matching nothing): an exact path costs one map lookup and a wildcard host a
    // few, so comparing one size's mix against another's would measure the mix, not the size.
    const spread = Math.floor((r * routes) / REQUESTS);
    const request =
      r % 10 === 9
        ? { host: "gw.bench.test", path: `/nothing/${r}/here` }
        : shapes[(spread - (spread % 10) + (r % 10)) % routes]!.request;
    // A string of its own per request, as the HTTP parser hands over: at 10 routes the same
    // few strings would otherwise sit in the CPU cache and flatter the small table.
    requests.push({ host: fresh(request.host), path: fresh(request.path) });
  }
  for (const request of requests) {
    if (request.path.startsWith("/nothing")) continue;
    if (table.match("GET", request.host, request.path, {}) === undefined) {
      throw new Error(`${request.host}${request.path} matched no route: the benchmark is wrong`);
    }
  }
  return { table, requests };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function fresh(text: string): string {
  return Buffer.from(text).toString();
}

/** `node e2e/dist/bench/scale/route-match.js`: the two sizes the issue names and the ratio. */
function main(): void {
  const [small, large] = measureRouteMatch([10, 10_000]) as [RouteMatchResult, RouteMatchResult];
  process.stdout.write(
    `route match: ${small.nsPerMatch.toFixed(0)} ns at ${small.routes} routes, ` +
      `${large.nsPerMatch.toFixed(0)} ns at ${large.routes} routes, ` +
      `ratio ${(large.nsPerMatch / small.nsPerMatch).toFixed(2)}x\n`,
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main();
}
