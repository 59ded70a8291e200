export type ParsedAddress =
  | { ok: true; host: string; port: number }
  | { ok: false; reason: string };

// Compile-time only: a DNS name or IPv4 literal, or a bracketed IPv6 literal.
const HOST_NAME =
  /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/;
const IPV6 = /^[0-9A-Fa-f:.]+$/;
const PORT = /^[0-9]{1,5}$/;

/** Parses "host:port" or "[v6]:port"; the reason says what is wrong without echoing input. */
export function parseNodeAddress(address: string): ParsedAddress {
  let host: string;
  let portText: string;
  if (address.startsWith("[")) {
    const close = address.indexOf("]");
    if (close < 0 || address[close + 1] !== ":") {
      return { ok: false, reason: "is not [ipv6]:port" };
    }
    host = address.slice(1, close);
    portText = address.slice(close + 2);
    if (!IPV6.test(host) || !host.includes(":"))
      return { ok: false, reason: "has a bad IPv6 host" };
  } else {
    const colon = address.lastIndexOf(":");
    if (colon <= 0) return { ok: false, reason: "is not host:port" };
    host = address.slice(0, colon);
    portText = address.slice(colon + 1);
    if (!HOST_NAME.test(host)) return { ok: false, reason: "has a bad host" };
  }
  if (!PORT.test(portText)) return { ok: false, reason: "has a bad port" };
  const port = Number(portText);
  if (port < 1 || port > 65535) return { ok: false, reason: "has a port outside 1..65535" };
  return { ok: true, host, port };
}
