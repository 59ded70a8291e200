import {
  type ProbeVerdict,
  type QuotaGrant,
  QuotaGrantSchema,
  type QuotaKind,
  toBinary,
} from "@clawgate/proto";
import type { FleetProbes } from "../breaker/fleet-probes.js";
import { ProbeRelay } from "../breaker/probe-relay.js";
import type { LeaseBook } from "../quota/lease-book.js";
import { SubShares } from "../quota/sub-shares.js";
import type { CoordinationMessage, ToWorker } from "./worker-messages.js";

/** What of the WorkerPool the coordination uses: who hears messages, and sending them. */
export interface CoordinatedWorkers {
  ids(): number[];
  sendTo(id: number, message: ToWorker): void;
  broadcast(message: ToWorker): void;
}

/**
 * The primary's end of what the fleet coordinates, for a data plane with `workers` > 1: tenant
 * budgets (SubShares lends the workers parts of the primary's leases) and half-open probes
 * (ProbeRelay lets one worker probe for the data plane). The control plane keeps seeing one data
 * plane: one stream, one set of leases, one claim per upstream.
 */
export class WorkerCoordination {
  readonly #workers: CoordinatedWorkers;
  readonly #shares: SubShares;
  readonly #probes: ProbeRelay;
  #connected = false;

  constructor(options: {
    workers: CoordinatedWorkers;
    book: Pick<LeaseBook, "lend" | "settle" | "giveBack" | "held">;
    fleetProbes: Pick<FleetProbes, "mayProbe" | "probed">;
    nodeId: string;
  }) {
    const workers = options.workers;
    this.#workers = workers;
    this.#shares = new SubShares({
      book: options.book,
      workers: () => workers.ids(),
      send: (worker, grant) => workers.sendTo(worker, grantMessage(grant)),
    });
    this.#probes = new ProbeRelay({
      fleet: options.fleetProbes,
      nodeId: options.nodeId,
      workers: () => workers.ids(),
      send: (worker, verdict) =>
        workers.sendTo(worker, { type: "clawgate:probe-verdict", ...verdict }),
    });
  }

  /** A worker's report of consumption, or its probe claim or release. */
  message(worker: number, message: CoordinationMessage): void {
    if (message.type === "clawgate:quota-usage") {
      this.#shares.usage(
        worker,
        message.reports.map((report) => ({
          tenant: report.tenant,
          kind: report.kind as QuotaKind,
          window: BigInt(report.window),
          consumed: Number(report.consumed),
          wantsMore: report.wantsMore,
          limit: report.limit,
        })),
      );
      return;
    }
    if (message.released === true) {
      this.#probes.probed(worker, message.upstream, message.success === true);
    } else this.#probes.claim(worker, message.upstream);
  }

  /** The control plane's grant, once the primary's LeaseBook took it. */
  granted(grant: QuotaGrant): void {
    this.#shares.granted(grant);
  }

  /** The control plane's probe verdict, once the primary's FleetProbes took it. */
  verdict(verdict: ProbeVerdict): void {
    this.#probes.onVerdict(verdict);
  }

  /** A worker died. */
  gone(worker: number): void {
    this.#shares.forget(worker);
    this.#probes.forget(worker);
  }

  /** The primary's stream opened or ended: what the workers hold of the old one lapses. */
  streamChanged(connected: boolean): void {
    if (connected === this.#connected) return;
    this.#connected = connected;
    this.#shares.reset();
    this.#probes.reset();
    this.#workers.broadcast({ type: "clawgate:stream-reset", connected });
  }
}

function grantMessage(grant: QuotaGrant): ToWorker {
  return {
    type: "clawgate:quota-grant",
    grant: Buffer.from(toBinary(QuotaGrantSchema, grant)).toString("base64"),
  };
}
