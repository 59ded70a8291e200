import { attemptLog } from "../proxy/pipeline/attempt-log.js";
import { breakerGate, breakerPermit } from "../proxy/pipeline/breaker.js";
import { cooldownGate, cooldownPerAttempt } from "../proxy/pipeline/cooldown.js";
import { type DeadlineEntry, DeadlineSweep } from "../proxy/pipeline/deadline-sweep.js";
import type { Exchange } from "../proxy/pipeline/exchange.js";
import { nodePick } from "../proxy/pipeline/node-pick.js";
import { policyChain } from "../proxy/pipeline/policy-chain.js";
import { requestBody } from "../proxy/pipeline/request-body.js";
import { requestMetrics } from "../proxy/pipeline/request-metrics.js";
import { retry } from "../proxy/pipeline/retry.js";
import {
  compose,
  type Dispatch,
  type Interceptor,
  type StageController,
  type StageHandler,
} from "../proxy/pipeline/stage.js";
import { staleIfError } from "../proxy/pipeline/stale-if-error.js";
import { streamUsageRequest, streamUsageResponse } from "../proxy/pipeline/stream-usage.js";
import { totalTimeout } from "../proxy/pipeline/total-timeout.js";
import { heapAllocated } from "../testing/heap-allocated.js";
import { stageWorld } from "../testing/pipeline-fakes.js";

/**
 * JS heap bytes each stage of the request pipeline allocates per request, alone and all
 * together, on the route `npm run bench` uses (2 retry attempts, the default timeouts), for a
 * 200 GET answered at once by a fake upstream; nothing leaves the process. A sampling heap
 * profile charges allocations to whatever frame V8 inlined them into; this counts exactly, stage
 * by stage. The client responder, the access log and the node's pool (undici) are left out:
 * `npm run bench:alloc` counts the whole request. Measures and prints; asserts nothing.
 *
 *   node data-plane/dist/bench/stage-alloc.js [requests]
 */
const requests = Number(process.argv[2] ?? 50_000);

const world = stageWorld({ route: { retry: { attempts: 2 } } });
const deps = world.deps;
// Under load a duration's deadline list never empties, so its timer stays armed; in this
// synchronous loop it would empty after every request and re-arm a timer each time. A
// long-lived entry on the route's totalMs keeps it as under load.
const sweep = new DeadlineSweep();
const resident: DeadlineEntry = {
  deadline: 0,
  prev: undefined,
  next: undefined,
  list: undefined,
  expired() {},
};
sweep.add(resident, world.exchange().route.totalTimeoutMs);

/** The stages of pipeline.ts between the access log and the node's pool, in its order. */
const stages: [string, () => Interceptor][] = [
  ["request-metrics", () => requestMetrics(deps.metrics)],
  ["stream-usage (response)", () => streamUsageResponse()],
  ["policy-chain", () => policyChain({ clock: deps.healing.clock })],
  ["stale-if-error", () => staleIfError(deps.healing.staleCache)],
  ["request-body", () => requestBody()],
  ["stream-usage (request)", () => streamUsageRequest()],
  ["cooldown gate", () => cooldownGate(deps)],
  ["breaker permit", () => breakerPermit(deps)],
  ["total-timeout (and stream idle)", () => totalTimeout(deps, sweep)],
  ["retry", () => retry(deps)],
  ["cooldown per attempt", () => cooldownPerAttempt(deps)],
  ["breaker gate", () => breakerGate(deps)],
  ["node-pick", () => nodePick(deps)],
  ["attempt-log", () => attemptLog(deps)],
];

const headers = { "content-type": "application/json", "content-length": "100" };
const chunk = Buffer.alloc(100);
const controller: StageController = { abort() {}, pause() {}, resume() {} };
/** The node's pool, played synchronously: the attempt starts and a 200 comes back whole. */
const upstream: Dispatch = (exchange, handler) => {
  exchange.attempt++;
  handler.onRequestStart(controller);
  handler.onResponseStart(controller, 200, headers);
  handler.onResponseData(controller, chunk);
  handler.onResponseEnd(controller);
};
/** The client responder's part that stages read: the response started, then settled. */
const client: StageHandler = {
  onRequestStart() {},
  onResponseStart() {},
  onResponseData() {},
  onResponseEnd() {},
  onFailure() {},
  onStale() {},
};

/** Exchanges are reused (made once, reset per request): the handler's own is not counted. */
const exchanges: Exchange[] = Array.from({ length: 64 }, () => world.exchange());

function bytesPerRequest(interceptors: Interceptor[]): number {
  const run = compose(interceptors, upstream);
  const loop = () => {
    for (let i = 0; i < requests; i++) {
      const exchange = exchanges[i & 63]!;
      exchange.settled = false;
      exchange.attempt = 0;
      exchange.node = undefined;
      exchange.tried = undefined;
      run(exchange, client);
    }
  };
  loop(); // warm: optimized code, slack-tracked object sizes
  loop();
  return heapAllocated(loop) / requests;
}

const floor = bytesPerRequest([]);
const rows: [string, number][] = stages.map(([name, make]) => [
  name,
  bytesPerRequest([make()]) - floor,
]);
rows.push(["all of them", bytesPerRequest(stages.map(([, make]) => make())) - floor]);
process.stdout.write(`JS heap B/request by pipeline stage (${requests} requests each)\n`);
for (const [name, bytes] of rows) {
  process.stdout.write(`${name.padEnd(32)} ${Math.max(0, bytes).toFixed(0).padStart(6)}\n`);
}
sweep.remove(resident);
