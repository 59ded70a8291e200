import { BlockList } from "node:net";
import { parseCidr } from "@clawgate/proto";
import type { Policy, PolicyAnswer, PolicyFactory, PolicyRequest } from "./policy.js";

const DENIED: PolicyAnswer = Object.freeze({ kind: "error", code: "CLAWGATE_IP_DENIED" });

/**
 * ipDeny, then ipAllow, against the address of the connection's peer (not X-Forwarded-For,
 * which the client writes). node:net's BlockList does the matching, v4 and v6; an IPv4 peer
 * on a dual-stack socket (::ffff:10.0.0.1) is matched as the IPv4 address it is.
 */
export const ipFilter: PolicyFactory = {
  name: "ip-filter",
  compile({ route }): Policy | undefined {
    if (route.ipAllow.length === 0 && route.ipDeny.length === 0) return undefined;
    const deny = blockList(route.ipDeny);
    const allow = route.ipAllow.length === 0 ? undefined : blockList(route.ipAllow);
    return {
      name: "ip-filter",
      onRequest(request: PolicyRequest): PolicyAnswer | undefined {
        const peer = peerOf(request);
        if (peer === undefined) return DENIED;
        if (deny.check(peer.address, peer.family)) return DENIED;
        if (allow !== undefined && !allow.check(peer.address, peer.family)) return DENIED;
        return undefined;
      },
    };
  },
};

function blockList(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const value of cidrs) {
    const parsed = parseCidr(value);
    // Validated before compiling; a value that slipped through matches nothing.
    if (parsed.ok) list.addSubnet(parsed.cidr.address, parsed.cidr.prefix, parsed.cidr.family);
  }
  return list;
}

const MAPPED_V4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i;

function peerOf(request: PolicyRequest): { address: string; family: "ipv4" | "ipv6" } | undefined {
  const address = request.req.socket.remoteAddress;
  if (address === undefined) return undefined;
  const mapped = MAPPED_V4.exec(address);
  if (mapped !== null) return { address: mapped[1]!, family: "ipv4" };
  return { address, family: address.includes(":") ? "ipv6" : "ipv4" };
}
