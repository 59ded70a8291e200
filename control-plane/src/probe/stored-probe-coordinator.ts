import type { Logger } from "pino";
import { Informer, type InformerBatch } from "../store/informer.js";
import type { KeyValue, Store } from "../store/store.js";
import type { ProbeCoordination, ProbeParty, ProbeVerdictMessage } from "./probe-coordination.js";
import { parseProbeKey, probeClaimKey, probesPrefix, probeVerdictKey } from "./probe-keys.js";

type Outcome = ProbeVerdictMessage["outcome"];

export interface StoredProbeCoordinatorOptions {
  store: Store;
  /** Key prefix with its trailing slash (e.g. "/clawgate/"); probes go under `{prefix}meta/probes/`. */
  prefix: string;
  /** This replica's id, written into its claims for whoever reads them. */
  replicaId: string;
  logger: Pick<Logger, "debug" | "info" | "warn">;
  /** A claim without a verdict lapses after this (its store lease's TTL); default 10 s. */
  leaseMs?: number;
}

/** A claim this replica holds for one of its data planes. */
interface Held {
  readonly party: ProbeParty;
  /** Revision that created the claim key: a compare on it touches this claim and no later one. */
  readonly revision: number;
  readonly lease: string;
}

/** Claim attempts that lost to a claim gone by the time it was read, before one gives up. */
const MAX_ATTEMPTS = 4;

/**
 * Half-open probes serialized across every control-plane replica (seed 004: one probe per fleet,
 * not per replica). A claim is a key per upstream, created in a transaction only if absent and
 * bound to a lease whose TTL is the claim's lapse: the replica that created it names its data
 * plane the prober, the others' claimants wait. The prober's verdict is written next to the claim
 * as the claim is deleted, in one transaction; every replica follows both keys through an
 * informer and relays the verdict to the data planes waiting on it (a claim deleted without a
 * verdict, lapsed or left, tells them "nobody probes", so they claim again). A replica that dies
 * loses nothing but its lease: its claims lapse as an in-memory claim would.
 */
export class StoredProbeCoordinator implements ProbeCoordination {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #replicaId: string;
  readonly #logger: StoredProbeCoordinatorOptions["logger"];
  readonly #leaseMs: number;
  readonly #informer: Informer;
  /** Upstream -> this replica's data planes waiting on another's probe. */
  readonly #waiting = new Map<string, Map<string, ProbeParty>>();
  /** Upstream -> the claim this replica holds for it. */
  readonly #held = new Map<string, Held>();
  /** Upstream -> the last claim seen ending: a claimant that read it just before learns its end. */
  readonly #ended = new Map<string, { claim: number; outcome: Outcome }>();
  /** Parties whose stream ended: a claim answered after that is given back at once. */
  readonly #left = new WeakSet<ProbeParty>();

  constructor(options: StoredProbeCoordinatorOptions) {
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#replicaId = options.replicaId;
    this.#logger = options.logger;
    this.#leaseMs = options.leaseMs ?? 10_000;
    this.#informer = new Informer({
      store: options.store,
      prefixes: [probesPrefix(options.prefix)],
      logger: options.logger,
      name: "probe claims",
      onBatch: (batch) => this.#onBatch(batch),
    });
  }

  /** Lists the claims and follows them; resolves once the first list is read. */
  start(): Promise<void> {
    return this.#informer.start();
  }

  stop(): Promise<void> {
    return this.#informer.stop();
  }

  claim(party: ProbeParty, upstream: string): void {
    this.#claim(party, upstream).catch((error: unknown) => {
      // Without the store no claim can be shared: the data plane probes on its own, as it does
      // without a control plane, rather than wait on a verdict nobody can write.
      this.#logger.warn({ err: error, upstream }, "could not claim a probe in the store");
      party.send(this.#verdict(upstream, party.nodeId, ""));
    });
  }

  release(party: ProbeParty, upstream: string, success: boolean): void {
    const held = this.#held.get(upstream);
    if (held?.party.id !== party.id) return;
    this.#held.delete(upstream);
    this.#end(upstream, held, success ? "success" : "failure");
  }

  leave(party: ProbeParty): void {
    this.#left.add(party);
    for (const waiting of this.#waiting.values()) waiting.delete(party.id);
    for (const [upstream, held] of this.#held) {
      if (held.party.id !== party.id) continue;
      this.#held.delete(upstream);
      this.#end(upstream, held, "");
    }
  }

  async #claim(party: ProbeParty, upstream: string): Promise<void> {
    if (this.#held.get(upstream)?.party.id === party.id) {
      party.send(this.#verdict(upstream, party.nodeId, ""));
      return;
    }
    const key = probeClaimKey(this.#prefix, upstream);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      // A claim already followed here ends through the watch, after this point: wait for it.
      const seen = this.#informer.get(key);
      if (seen !== undefined) {
        this.#wait(party, upstream, seen);
        return;
      }
      const lease = await this.#store.grantLease(Math.ceil(this.#leaseMs / 1000));
      const value = JSON.stringify({ prober: party.nodeId, replica: this.#replicaId });
      const written = await this.#store.commit(
        [{ key, modRevision: 0 }],
        [{ type: "put", key, value, lease }],
      );
      if (written.succeeded) {
        const held = { party, revision: written.revision, lease };
        if (this.#left.has(party)) {
          this.#end(upstream, held, "");
          return;
        }
        this.#held.set(upstream, held);
        party.send(this.#verdict(upstream, party.nodeId, ""));
        return;
      }
      this.#store.revokeLease(lease).catch(() => {});
      const current = await this.#store.get(key);
      if (current === undefined) continue;
      const ended = this.#ended.get(upstream);
      if (ended?.claim === current.createRevision) {
        // The watch saw this claim end while it was being read: its verdict is the answer.
        party.send(this.#verdict(upstream, "", ended.outcome));
        return;
      }
      this.#wait(party, upstream, current);
      return;
    }
    throw new Error(`the claim on ${upstream} changed hands ${MAX_ATTEMPTS} times in a row`);
  }

  #wait(party: ProbeParty, upstream: string, claim: KeyValue): void {
    if (this.#left.has(party)) return;
    let waiting = this.#waiting.get(upstream);
    if (waiting === undefined) {
      waiting = new Map();
      this.#waiting.set(upstream, waiting);
    }
    waiting.set(party.id, party);
    party.send(this.#verdict(upstream, proberOf(claim), ""));
  }

  /** Deletes the claim, with the verdict beside it when there is one, if it is still this one. */
  #end(upstream: string, held: Held, outcome: Outcome): void {
    const key = probeClaimKey(this.#prefix, upstream);
    const verdict = JSON.stringify({ outcome, claim: held.revision });
    this.#store
      .commit(
        [{ key, modRevision: held.revision }],
        outcome === ""
          ? [{ type: "delete", key }]
          : [
              {
                type: "put",
                key: probeVerdictKey(this.#prefix, upstream),
                value: verdict,
                lease: held.lease,
              },
              { type: "delete", key },
            ],
      )
      .then((written) => {
        // Lapsed meanwhile (its lease expired): the waiters were told, and may probe already.
        if (!written.succeeded) this.#logger.debug({ upstream }, "the probe claim had lapsed");
      })
      .catch((error: unknown) => {
        this.#logger.warn({ err: error, upstream }, "could not end a probe claim; it lapses");
      });
  }

  /** Claims that ended (a verdict written, or a claim deleted without one) reach their waiters. */
  #onBatch(batch: InformerBatch): void {
    const ends = new Map<string, { claim: number; outcome: Outcome }>();
    for (const change of batch.changes) {
      const parsed = parseProbeKey(this.#prefix, change.key);
      if (parsed === undefined) continue;
      const { kind, upstream } = parsed;
      if (kind === "verdict" && change.current !== undefined) {
        const verdict = parseVerdict(change.current.value);
        if (verdict !== undefined) ends.set(upstream, verdict);
      } else if (kind === "claim" && change.current === undefined && change.previous) {
        const claim = change.previous.createRevision;
        // The verdict written with this delete wins, in whichever order the two arrive.
        if (ends.get(upstream)?.claim !== claim) ends.set(upstream, { claim, outcome: "" });
        if (this.#held.get(upstream)?.revision === claim) this.#held.delete(upstream);
      }
    }
    for (const [upstream, end] of ends) {
      this.#ended.set(upstream, end);
      const waiting = this.#waiting.get(upstream);
      this.#waiting.delete(upstream);
      const verdict = this.#verdict(upstream, "", end.outcome);
      for (const party of waiting?.values() ?? []) party.send(verdict);
    }
  }

  #verdict(upstream: string, prober: string, outcome: Outcome): ProbeVerdictMessage {
    return { upstream, prober, outcome, leaseMs: this.#leaseMs };
  }
}

function proberOf(claim: KeyValue): string {
  try {
    const { prober } = JSON.parse(claim.value) as { prober?: unknown };
    // A claim whose holder cannot be read still holds the probe: the waiter waits it out.
    return typeof prober === "string" && prober !== "" ? prober : "another data plane";
  } catch {
    return "another data plane";
  }
}

function parseVerdict(value: string): { claim: number; outcome: Outcome } | undefined {
  try {
    const { outcome, claim } = JSON.parse(value) as { outcome?: unknown; claim?: unknown };
    if (outcome !== "success" && outcome !== "failure") return undefined;
    return typeof claim === "number" ? { claim, outcome } : undefined;
  } catch {
    return undefined;
  }
}
