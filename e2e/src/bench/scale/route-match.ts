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
 * Route i of every table is bench:scale's route BASE + i, so paths carry numbers of the same
 * width at every size ("/api/v0/svc-10003/..." at 10 routes as at 10,000, where "svc-3" would
 * give the small table shorter segments to hash and compare). Hosts keep bench:scale's
 * numbering (BASE is a multiple of its 500 hosts and 50 wildcard domains).
 */
const BASE = 100_000;

/**
 * Nanoseconds per RouteTable.match on tables of `sizes` routes shaped as bench:scale makes
 * them (exact paths, shared prefixes, exact and wildcard hosts), for requests that reach
 * routes spread over each table plus one in eleven that match nothing. Every size gets the same
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
    // Every other round in the other order, so neither size always runs right after the
    // other has filled the caches with its own table.
    for (const bench of round % 2 === 0 ? benches : [...benches].reverse()) {
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
  const shapes = Array.from({ length: routes }, (_, i) => routeShape(BASE + i, 1));
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
    // Spread over the table, but every size gets the same mix of route shapes (each of the ten
    // shapes, wildcard hosts included, and one in eleven matching nothing): an exact path costs
    // less than a prefix and a wildcard host more than an exact one, so comparing one size's
    // mix against another's would measure the mix, not the size.
    const spread = Math.floor((r * routes) / REQUESTS);
    const shape = r % 11;
    const target = shape === 10 ? undefined : shapes[(spread - (spread % 10) + shape) % routes]!;
    const request = target?.request ?? { host: "gw.bench.test", path: `/nothing/${BASE + r}/here` };
    // A string of its own per request, as the HTTP parser hands over: at 10 routes the same
    // few strings would otherwise sit in the CPU cache and flatter the small table.
    const fresher = { host: fresh(request.host), path: fresh(request.path) };
    const matched = table.match("GET", fresher.host, fresher.path, {});
    if (matched?.name !== target?.name) {
      throw new Error(
        `${request.host}${request.path} matched ${matched?.name ?? "no route"}, not ` +
          `${target?.name ?? "no route"}: the benchmark is wrong`,
      );
    }
    requests.push(fresher);
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
