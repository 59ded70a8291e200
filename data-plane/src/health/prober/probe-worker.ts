/**
 * Entry of the probe worker thread. Probes run here, on their own event loop, so a proxy whose
 * main loop is busy with large bodies cannot delay them (seed 000 section 5.2: probes that share
 * the proxy's loop stretched detection from 10 s to over 30 s).
 */
import { parentPort, workerData } from "node:worker_threads";
import { createNodeResolver } from "../../upstream/node-resolver.js";
import { probeNode, setProbeLookup } from "./probe.js";
import type { FromWorker, ProbeResult, ToWorker } from "./probe-protocol.js";
import { ProbeScheduler } from "./probe-scheduler.js";
import { TurnBatch } from "./turn-batch.js";

const port = parentPort;
if (port === null) throw new Error("probe-worker.js must run in a worker thread");

// The data plane's dnsServers: probes resolve node names as its connections do.
const dnsServers = (workerData as { dnsServers?: string[] } | undefined)?.dnsServers ?? [];
setProbeLookup(createNodeResolver(dnsServers).lookup);

// One message per turn of this thread for the probes that finished in it, not one per probe.
const results = new TurnBatch<ProbeResult>((batch) => {
  const message: FromWorker = { type: "results", results: batch };
  port.postMessage(message);
});
const scheduler = new ProbeScheduler({
  probe: probeNode,
  emit: (result) => results.add(result),
});

port.on("message", (message: ToWorker) => {
  if (message.type === "upstreams") scheduler.setUpstreams(message.changes);
  else if (message.type === "probe-now") {
    scheduler.probeNow(message.upstream, message.address, message.ticket);
  }
});
