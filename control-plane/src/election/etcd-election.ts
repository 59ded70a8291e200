import { type Campaign, Etcd3 } from "etcd3";
import type { Logger } from "pino";
import { type LeaderElection, LeadershipState } from "./leader-election.js";

export interface EtcdElectionOptions {
  /** etcd client URLs. */
  endpoints: string[];
  /** Key prefix with its trailing slash; the election lives under `{prefix}election/{name}/`. */
  prefix: string;
  /** What this replica campaigns with; shows as the leader's value. */
  instanceId: string;
  /** Election name; default "remediation". */
  name?: string;
  /** Session lease TTL: how long a dead leader blocks the others; default 10 s, at least 1. */
  ttlSeconds?: number;
  /** Wait before campaigning again after a lost session; default 1 s. */
  retryMs?: number;
  logger?: Pick<Logger, "info" | "warn">;
}

/** Bounds resign() in stop() so shutdown never hangs on a dead etcd. */
const RESIGN_TIMEOUT_MS = 2_000;

/**
 * Leader election on etcd3's Election (a lease-backed key; the oldest key leads). The session
 * is the campaign's lease: when it is lost the campaign fails and this replica stops leading at
 * once. etcd3 notices a lost connection only after twice the TTL, later than etcd expires the
 * lease and elects someone else, so while leading this replica also reads its own campaign key
 * every third of the TTL and steps down when it could not for two thirds of it: two leaders
 * never act at once for longer than that.
 */
export function createEtcdElection(options: EtcdElectionOptions): LeaderElection {
  if (options.endpoints.length === 0) throw new RangeError("endpoints must not be empty");
  const ttlSeconds = Math.max(1, Math.ceil(options.ttlSeconds ?? 10));
  const retryMs = options.retryMs ?? 1_000;
  const name = options.name ?? "remediation";
  const logger = options.logger;
  const client = new Etcd3({ hosts: options.endpoints, dialTimeout: 5_000 });
  const election = client.namespace(options.prefix).election(name, ttlSeconds);
  const state = new LeadershipState();
  const confirmEveryMs = (ttlSeconds * 1_000) / 3;
  const stepDownAfterMs = (ttlSeconds * 2_000) / 3;

  let running = false;
  let campaign: Campaign | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let confirmTimer: NodeJS.Timeout | undefined;

  function campaignNow(): void {
    retryTimer = undefined;
    if (!running) return;
    const current = election.campaign(options.instanceId);
    campaign = current;
    current.on("elected", () => {
      if (campaign !== current || !running) return;
      logger?.info({ election: name, instanceId: options.instanceId }, "elected leader");
      state.set(true);
      confirm(current);
    });
    current.on("error", (error) => {
      if (campaign !== current) return;
      lose(current, `campaign failed: ${error.message}`);
    });
  }

  /** While leading, proves now and then that the campaign key (and so the lease) still exists. */
  function confirm(current: Campaign): void {
    let confirmedAt = Date.now();
    let checking = false;
    const tick = () => {
      if (campaign !== current || !state.leader) return;
      if (Date.now() - confirmedAt >= stepDownAfterMs) {
        lose(current, `could not confirm the session for ${Date.now() - confirmedAt} ms`);
        return;
      }
      if (!checking) {
        checking = true;
        const startedAt = Date.now();
        current
          .getCampaignKey()
          .then((key) => client.get(key).string())
          .then(
            (value) => {
              checking = false;
              if (value === null) lose(current, "the campaign key is gone: the session expired");
              else confirmedAt = startedAt;
            },
            () => {
              checking = false;
            },
          );
      }
      confirmTimer = setTimeout(tick, confirmEveryMs);
      confirmTimer.unref();
    };
    confirmTimer = setTimeout(tick, confirmEveryMs);
    confirmTimer.unref();
  }

  function lose(current: Campaign, reason: string): void {
    if (campaign !== current) return;
    campaign = undefined;
    clearTimeout(confirmTimer);
    if (state.leader) logger?.warn({ election: name, reason }, "lost leadership");
    else logger?.warn({ election: name, reason }, "campaign failed");
    state.set(false);
    // Revokes the lease if etcd is still there, so the next leader need not wait for the TTL.
    current.resign().catch(() => undefined);
    if (running) {
      retryTimer = setTimeout(campaignNow, retryMs);
      retryTimer.unref();
    }
  }

  return {
    async start() {
      if (running) return;
      running = true;
      campaignNow();
    },
    async stop() {
      running = false;
      clearTimeout(retryTimer);
      clearTimeout(confirmTimer);
      const current = campaign;
      campaign = undefined;
      state.set(false);
      if (current !== undefined) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          current.resign().catch(() => undefined),
          new Promise((resolve) => {
            timer = setTimeout(resolve, RESIGN_TIMEOUT_MS);
          }),
        ]);
        clearTimeout(timer);
      }
      client.close();
    },
    isLeader: () => state.leader,
    onChange: (listener) => state.onChange(listener),
  };
}
