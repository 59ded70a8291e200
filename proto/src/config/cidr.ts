import { isIPv4, isIPv6 } from "node:net";

/** A CIDR block as both planes read it: `10.0.0.0/8`, `2001:db8::/32`, or a bare address. */
export interface Cidr {
  readonly address: string;
  readonly prefix: number;
  readonly family: "ipv4" | "ipv6";
}

/**
 * Parses `address/prefix` (a bare address is a /32 or /128), or says what is wrong with it.
 * Checked at validation time only; the data plane matches with node:net's BlockList.
 */
export function parseCidr(value: string): { ok: true; cidr: Cidr } | { ok: false; reason: string } {
  const slash = value.indexOf("/");
  const address = slash < 0 ? value : value.slice(0, slash);
  const family = isIPv4(address) ? "ipv4" : isIPv6(address) ? "ipv6" : undefined;
  if (family === undefined) {
    return { ok: false, reason: `"${address}" is not an IPv4 or IPv6 address` };
  }
  const max = family === "ipv4" ? 32 : 128;
  if (slash < 0) return { ok: true, cidr: { address, prefix: max, family } };
  const bits = value.slice(slash + 1);
  const prefix = /^[0-9]{1,3}$/.test(bits) ? Number(bits) : Number.NaN;
  if (!(prefix >= 0 && prefix <= max)) {
    return { ok: false, reason: `prefix length must be 0..${max}, got "${bits}"` };
  }
  return { ok: true, cidr: { address, prefix, family } };
}

export const CIDR_RULE = "must be a CIDR such as 10.0.0.0/8 or 2001:db8::/32";
