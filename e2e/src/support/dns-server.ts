import { createSocket, type RemoteInfo } from "node:dgram";
import type { AddressInfo } from "node:net";

/** A DNS server for tests: A records the test sets and changes; anything else is NXDOMAIN. */
export interface TestDnsServer {
  /** "127.0.0.1:port", as the dnsServers setting takes it. */
  address: string;
  /** Answers `name` with `ipv4` from now on (TTL 1 s). */
  set(name: string, ipv4: string): void;
  /** A queries answered so far for `name`. */
  queries(name: string): number;
  close(): Promise<void>;
}

/**
 * A tiny authoritative DNS server on UDP 127.0.0.1 (RFC 1035 message format): one question per
 * query, A records from a table, AAAA for a known name answered empty (NOERROR), NXDOMAIN for
 * unknown names. Enough for the data plane's resolver; nothing else is implemented.
 */
export async function startTestDnsServer(): Promise<TestDnsServer> {
  const records = new Map<string, string>();
  const counts = new Map<string, number>();
  const socket = createSocket("udp4");
  socket.on("message", (query: Buffer, peer: RemoteInfo) => {
    const question = readQuestion(query);
    if (question === undefined) return;
    const { name, type, end } = question;
    const ip = records.get(name);
    if (type === 1) counts.set(name, (counts.get(name) ?? 0) + 1);
    const answer = type === 1 && ip !== undefined ? aRecord(ip) : undefined;
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // id
    // QR, opcode 0, AA, RD copied; RA; rcode NXDOMAIN (3) for unknown names.
    header[2] = 0x84 | (query[2]! & 0x01);
    header[3] = 0x80 | (ip === undefined ? 3 : 0);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answer === undefined ? 0 : 1, 6);
    const parts = [header, query.subarray(12, end)];
    if (answer !== undefined) parts.push(answer);
    socket.send(Buffer.concat(parts), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  const { port } = socket.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    set: (name, ipv4) => records.set(name.toLowerCase(), ipv4),
    queries: (name) => counts.get(name.toLowerCase()) ?? 0,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/** The query's name (lower case), type and where its question ends. */
function readQuestion(query: Buffer): { name: string; type: number; end: number } | undefined {
  if (query.length < 17) return undefined;
  const labels: string[] = [];
  let at = 12;
  while (at < query.length && query[at] !== 0) {
    const length = query[at]!;
    labels.push(query.toString("ascii", at + 1, at + 1 + length));
    at += 1 + length;
  }
  if (at + 5 > query.length) return undefined;
  return { name: labels.join(".").toLowerCase(), type: query.readUInt16BE(at + 1), end: at + 5 };
}

/** An A answer pointing back at the question's name, TTL 1 s. */
function aRecord(ipv4: string): Buffer {
  const out = Buffer.alloc(16);
  out.writeUInt16BE(0xc00c, 0); // name: pointer to offset 12
  out.writeUInt16BE(1, 2); // type A
  out.writeUInt16BE(1, 4); // class IN
  out.writeUInt32BE(1, 6); // TTL
  out.writeUInt16BE(4, 10);
  ipv4.split(".").forEach((octet, i) => {
    out[12 + i] = Number(octet);
  });
  return out;
}
