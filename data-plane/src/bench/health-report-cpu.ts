import { HealthRegistry } from "../health/health-registry.js";
import type { HealthTarget } from "../health/health-targets.js";
import type { ProbeResult } from "../health/prober/probe-protocol.js";
import { HealthReportEncoder } from "../snapshot-client/health-report-bytes.js";

/**
 * A data plane's CPU per node-health report while it watches `nodes` nodes (ten per upstream)
 * and `changed` of them change state between two reports (issue 9: a steady trickle of
 * evictions): the whole view built and encoded each time, against a changes-only report (the
 * change log taken and encoded). The probes are fed by hand; nothing leaves the process.
 * Measures and prints; asserts nothing.
 *
 *   node data-plane/dist/bench/health-report-cpu.js [nodes] [changed] [reports]
 */
const nodeCount = Number(process.argv[2] ?? 20_000);
const changed = Number(process.argv[3] ?? 5);
const reports = Number(process.argv[4] ?? 50);

let deliver: (result: ProbeResult) => void = () => {};
const registry = new HealthRegistry({
  prober: (onResults) => {
    deliver = (result) => onResults([result]);
    return { setUpstreams() {}, probeNow() {}, async close() {} };
  },
});
const targets: HealthTarget[] = Array.from({ length: nodeCount }, (_, i) => ({
  upstream: `upstream-${Math.floor(i / 10)}`,
  address: `127.1.${Math.floor(i / 250)}.${i % 250}:9`,
  host: `127.1.${Math.floor(i / 250)}.${i % 250}`,
  port: 9,
  healthCheck: { unhealthyThreshold: 1, healthyThreshold: 1 },
}));
registry.sync(targets);
await registry.synced();

/** `changed` nodes spread over the view flip state (one probe each, thresholds of 1). */
function change(round: number): void {
  for (let k = 0; k < changed; k++) {
    const target = targets[(round * 7919 + k * 104_729) % nodeCount]!;
    const ok = registry.state(target.upstream, target.address) !== "healthy";
    deliver({
      type: "result",
      upstream: target.upstream,
      address: target.address,
      ok,
      evidence: ok ? { tcpMs: 0.3 } : { error: "ECONNREFUSED" },
      durationMs: 1,
      at: Date.now(),
      ticket: Number.MAX_SAFE_INTEGER,
    });
  }
}

function measure(kind: "whole" | "changes-only", print: boolean): void {
  const encoder = new HealthReportEncoder();
  // The report after Hello, as both kinds start: its encodings are cached from then on.
  encoder.encode(registry.snapshot());
  let bytes = 0;
  let cpuUs = 0;
  for (let round = 1; round <= reports; round++) {
    change(round);
    const cpu = process.cpuUsage();
    if (kind === "whole") {
      bytes += encoder.encode(registry.snapshot()).length;
    } else {
      const changes = registry.takeChanges();
      if (changes === undefined) throw new Error("the change log overflowed");
      bytes += encoder.encodeChanges(changes).length;
    }
    const used = process.cpuUsage(cpu);
    cpuUs += used.user + used.system;
  }
  if (!print) return;
  console.log(
    `${kind.padEnd(12)}: CPU ${(cpuUs / 1_000 / reports).toFixed(3)} ms a report (built and encoded), ` +
      `${(bytes / reports / 1024).toFixed(1)} KiB a report`,
  );
}

/**
 * The longest event-loop turn while the whole view after a Hello is built and encoded: in turns
 * (as sent now) or in one (as before), each with a fresh encoder, as after a reconnect.
 */
async function wholeViewTurn(inTurns: boolean): Promise<number> {
  let longest = 0;
  let last = performance.now();
  let running = true;
  const tick = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  const encoder = new HealthReportEncoder();
  if (inTurns) await encoder.encodeInTurns(await registry.snapshotInTurns());
  else encoder.encode(registry.snapshot());
  await new Promise((resolve) => setImmediate(resolve));
  running = false;
  return longest;
}

console.log(
  `${reports} reports of a data plane watching ${nodeCount} nodes, ${changed} changing between two`,
);
await wholeViewTurn(true);
const oneTurn = await wholeViewTurn(false);
const inTurns = await wholeViewTurn(true);
console.log(
  `whole view after Hello, built and encoded: longest turn ${oneTurn.toFixed(1)} ms in one go, ${inTurns.toFixed(1)} ms in turns`,
);
// A warm-up pass (JIT) first, not printed.
for (const print of [false, true]) {
  for (const kind of ["whole", "changes-only"] as const) measure(kind, print);
}
await registry.close();
