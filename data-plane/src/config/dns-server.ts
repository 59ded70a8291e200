import { isIP } from "node:net";

/**
 * True for what dns.Resolver.setServers takes: an IP address, "ipv4:port" or "[ipv6]:port".
 * Checked at boot, so a typo exits 2 naming dnsServers instead of failing every lookup later.
 */
export function isDnsServer(server: string): boolean {
  if (isIP(server) !== 0) return true;
  const v6 = /^\[([^\]]+)\]:(\d{1,5})$/.exec(server);
  const v4 = /^([^:]+):(\d{1,5})$/.exec(server);
  const match = v6 ?? v4;
  if (match === null) return false;
  const port = Number(match[2]);
  return isIP(match[1]!) === (v6 ? 6 : 4) && port >= 1 && port <= 65_535;
}
