import { Worker } from "node:worker_threads";
import type { FromWorker, ProbeResult, ProbeTarget, ToWorker } from "./probe-protocol.js";
import { keepForReplay, type ReplayTargets, replayed } from "./replay-targets.js";
import { probeWorkerUrl } from "./worker-entry.js";

/** What the health registry needs from a prober; `ProbeWorker` is the real one. */
export interface Prober {
  /** Each named upstream's nodes to probe (empty: none); other upstreams are left as they are. */
  setUpstreams(changes: ReadonlyMap<string, readonly ProbeTarget[]>): void;
  /** Probe the node at once; results of probes started after this carry `ticket`. */
  probeNow(upstream: string, address: string, ticket: number): void;
  close(): Promise<void>;
}

/**
 * Builds a prober that hands finished probes to `onResults`, in the order they finished,
 * several at once when they finished together (one call per message from the worker).
 */
export type ProberFactory = (onResults: (results: readonly ProbeResult[]) => void) => Prober;

export interface ProbeWorkerOptions {
  /** Receives the finished probes, on the main thread: each turn's of the worker in one call. */
  onResults: (results: readonly ProbeResult[]) => void;
  /** Told when the worker died unexpectedly (it is restarted); default: ignored. */
  onError?: (err: Error) => void;
  /** Wait before restarting a dead worker; default 1000 ms. */
  restartDelayMs?: number;
  /** Worker script; default `probeWorkerUrl()`. */
  url?: URL;
  /** DNS servers probes resolve node names with (dnsServers); default the system resolver. */
  dnsServers?: readonly string[];
}

interface PendingProbeNow {
  readonly upstream: string;
  readonly address: string;
  readonly ticket: number;
}

/**
 * The main-thread side of the probe worker. It only forwards messages: each batch of results is
 * handed to `onResults` as it arrives, so the proxy's loop pays one callback per batch. A worker
 * that dies is restarted with the last targets, so layer 2 heals itself too.
 */
export class ProbeWorker implements Prober {
  private worker: Worker;
  /** Every upstream's targets, replayed to a restarted worker; no object a node (see keepForReplay). */
  private readonly targets = new Map<string, ReplayTargets>();
  /** Probe-now tickets, replayed after a restart so a quarantined node still gets its probe. */
  private readonly tickets = new Map<string, PendingProbeNow>();
  private closed = false;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly url: URL;

  constructor(private readonly options: ProbeWorkerOptions) {
    this.url = options.url ?? probeWorkerUrl();
    this.worker = this.start();
  }

  /** The worker's thread id (differs from the main thread's 0). */
  get threadId(): number {
    return this.worker.threadId;
  }

  /** The whole set of nodes to probe: upstreams not in `targets` stop being probed. */
  setTargets(targets: readonly ProbeTarget[]): void {
    const changes = new Map<string, ProbeTarget[]>();
    for (const upstream of this.targets.keys()) changes.set(upstream, []);
    for (const target of targets) {
      const list = changes.get(target.upstream);
      if (list === undefined) changes.set(target.upstream, [target]);
      else list.push(target);
    }
    this.setUpstreams(changes);
  }

  setUpstreams(changes: ReadonlyMap<string, readonly ProbeTarget[]>): void {
    if (changes.size === 0) return;
    for (const [upstream, targets] of changes) {
      if (targets.length === 0) this.targets.delete(upstream);
      else this.targets.set(upstream, keepForReplay(targets));
      if (this.tickets.size === 0) continue;
      const keep = new Set(targets.map((t) => t.address));
      for (const [key, pending] of this.tickets) {
        if (pending.upstream === upstream && !keep.has(pending.address)) this.tickets.delete(key);
      }
    }
    this.post({ type: "upstreams", changes: [...changes] });
  }

  probeNow(upstream: string, address: string, ticket: number): void {
    this.tickets.set(keyOf(upstream, address), { upstream, address, ticket });
    this.post({ type: "probe-now", upstream, address, ticket });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.restartTimer);
    await this.worker.terminate();
  }

  private start(): Worker {
    const worker = new Worker(this.url, {
      workerData: { dnsServers: [...(this.options.dnsServers ?? [])] },
    });
    // The proxy's servers keep the process alive; a prober alone must not.
    worker.unref();
    worker.on("message", (message: FromWorker) => this.options.onResults(message.results));
    worker.on("error", (err) => this.options.onError?.(err));
    worker.on("exit", (code) => {
      if (this.closed) return;
      this.options.onError?.(new Error(`probe worker exited with code ${code}; restarting`));
      this.restartTimer = setTimeout(() => this.restart(), this.options.restartDelayMs ?? 1000);
      this.restartTimer.unref();
    });
    return worker;
  }

  private restart(): void {
    if (this.closed) return;
    this.worker = this.start();
    const changes: [string, ProbeTarget[]][] = [];
    for (const [upstream, kept] of this.targets) changes.push([upstream, replayed(kept)]);
    this.post({ type: "upstreams", changes });
    for (const pending of this.tickets.values()) this.post({ type: "probe-now", ...pending });
  }

  private post(message: ToWorker): void {
    this.worker.postMessage(message);
  }
}

function keyOf(upstream: string, address: string): string {
  return `${upstream} ${address}`;
}
