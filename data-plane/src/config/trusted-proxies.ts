import { BlockList } from "node:net";
import { CIDR_RULE, parseCidr } from "@clawgate/proto";
import { z } from "zod";

/** One entry of the trustedProxies setting: a CIDR, or a bare address (a /32 or /128). */
export const trustedProxyCidr = z.string().superRefine((value, ctx) => {
  const parsed = parseCidr(value);
  if (!parsed.ok) ctx.addIssue({ code: "custom", message: `${CIDR_RULE}; ${parsed.reason}` });
});

/** Node reports an IPv4 peer on a dual-stack socket as "::ffff:10.0.0.1", lower case. */
const MAPPED_V4_PREFIX = "::ffff:";

/**
 * The peers (load balancers, other proxies) whose forwarding headers the proxy keeps: built
 * once from the trustedProxies setting at boot, then one BlockList check per request. An IPv4
 * peer on a dual-stack socket (::ffff:10.0.0.1) is matched as the IPv4 address it is.
 */
export class TrustedProxies {
  readonly #list = new BlockList();

  private constructor(cidrs: readonly string[]) {
    for (const value of cidrs) {
      const parsed = parseCidr(value);
      // The settings loader refused a bad one already.
      if (parsed.ok) {
        this.#list.addSubnet(parsed.cidr.address, parsed.cidr.prefix, parsed.cidr.family);
      }
    }
  }

  /** undefined for an empty list: then no request pays for a check. */
  static of(cidrs: readonly string[]): TrustedProxies | undefined {
    return cidrs.length === 0 ? undefined : new TrustedProxies(cidrs);
  }

  /** Whether the connection's peer address is one of the trusted proxies. */
  trusts(address: string | undefined): boolean {
    if (address === undefined) return false;
    // Checked per request: a prefix test and one slice, not a regex match.
    if (address.startsWith(MAPPED_V4_PREFIX) && address.includes(".", MAPPED_V4_PREFIX.length)) {
      return this.#list.check(address.slice(MAPPED_V4_PREFIX.length), "ipv4");
    }
    return this.#list.check(address, address.includes(":") ? "ipv6" : "ipv4");
  }
}
