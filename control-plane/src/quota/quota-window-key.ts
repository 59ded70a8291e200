import { QuotaKind } from "@clawgate/proto";
import type { WindowKey } from "./window-counter.js";

/**
 * Where the control-plane replicas share a tenant window's count:
 * `{prefix}meta/quota/{tenant}/{kind}/{window}`, e.g. `/clawgate/meta/quota/acme/requests-per-minute/29612345`.
 * Under meta/, which the snapshot builder ignores, so a count never rebuilds a snapshot. Tenant
 * names are resource names ([a-z0-9-]), so they never nest keys.
 */

const KIND_NAMES = new Map<QuotaKind, string>([
  [QuotaKind.REQUESTS_PER_MINUTE, "requests-per-minute"],
  [QuotaKind.TOKENS_PER_MINUTE, "tokens-per-minute"],
  [QuotaKind.TOKENS_PER_DAY, "tokens-per-day"],
]);
const KINDS_BY_NAME = new Map([...KIND_NAMES].map(([kind, name]) => [name, kind]));

/** The name of a quota kind in keys and metric labels: `requests-per-minute`, ... */
export function quotaKindName(kind: QuotaKind): string {
  const name = KIND_NAMES.get(kind);
  if (name === undefined) throw new Error(`no name for quota kind ${kind}`);
  return name;
}

export function quotaWindowPrefix(prefix: string): string {
  return `${prefix}meta/quota/`;
}

export function quotaWindowKey(prefix: string, key: Omit<WindowKey, "windowMs">): string {
  return `${quotaWindowPrefix(prefix)}${key.tenant}/${quotaKindName(key.kind)}/${key.window}`;
}

/** The tenant window a count's key names; undefined for any other key. */
export function parseQuotaWindowKey(
  prefix: string,
  key: string,
): Omit<WindowKey, "windowMs"> | undefined {
  const base = quotaWindowPrefix(prefix);
  if (!key.startsWith(base)) return undefined;
  const [tenant, kindName, window, ...rest] = key.slice(base.length).split("/");
  const kind = KINDS_BY_NAME.get(kindName ?? "");
  if (tenant === undefined || tenant === "" || kind === undefined || rest.length > 0)
    return undefined;
  if (window === undefined || !/^\d+$/.test(window)) return undefined;
  return { tenant, kind, window: Number(window) };
}
