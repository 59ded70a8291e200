/**
 * Entry of the probe worker thread. Probes run here, on their own event loop, so a proxy whose
 * main loop is busy with large bodies cannot delay them (seed 000 section 5.2: probes that share
 * the proxy's loop stretched detection from 10 s to over 30 s).
 */
import { parentPort } from "node:worker_threads";
import { probeNode } from "./probe.js";
import type { FromWorker, ToWorker } from "./probe-protocol.js";
import { ProbeScheduler } from "./probe-scheduler.js";

const port = parentPort;
if (port === null) throw new Error("probe-worker.js must run in a worker thread");

const scheduler = new ProbeScheduler({
  probe: probeNode,
  emit: (result: FromWorker) => port.postMessage(result),
});

port.on("message", (message: ToWorker) => {
  if (message.type === "upstreams") scheduler.setUpstreams(message.changes);
  else if (message.type === "probe-now") {
    scheduler.probeNow(message.upstream, message.address, message.ticket);
  }
});
