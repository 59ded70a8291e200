import dns, { type LookupAddress, type LookupOptions } from "node:dns";
import { isIP } from "node:net";

/** net.connect's `lookup` option: how a connection turns a node's name into an address. */
export type LookupFunction = (
  hostname: string,
  options: LookupOptions,
  callback: (
    error: NodeJS.ErrnoException | null,
    address: string | LookupAddress[],
    family?: number,
  ) => void,
) => void;

/**
 * How node names are resolved: the system resolver (getaddrinfo, /etc/hosts included) by
 * default, or the DNS servers of the `dnsServers` setting, asked directly. The same answer
 * serves new connections (`lookup`) and the periodic re-resolution (`resolveAll`), so a change
 * the refresh sees is the one the next connection follows.
 */
export interface NodeResolver {
  /** For net/tls.connect; undefined means Node's own (the system resolver). */
  readonly lookup: LookupFunction | undefined;
  /** Every address `host` resolves to now, sorted (so two answers compare as strings). */
  resolveAll(host: string): Promise<string[]>;
}

/** A resolver over `servers` ("ip" or "ip:port", port 53 by default), or the system one. */
export function createNodeResolver(servers: readonly string[] = []): NodeResolver {
  if (servers.length === 0) {
    return {
      lookup: undefined,
      resolveAll: async (host) =>
        (await dns.promises.lookup(host, { all: true })).map((a) => a.address).sort(),
    };
  }
  const resolver = new dns.promises.Resolver({ timeout: 2_000, tries: 2 });
  resolver.setServers([...servers]);
  const resolveAll = async (host: string): Promise<LookupAddress[]> => {
    if (isIP(host) !== 0) return [{ address: host, family: isIP(host) }];
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const found: LookupAddress[] = [];
    if (v4.status === "fulfilled")
      for (const address of v4.value) found.push({ address, family: 4 });
    if (v6.status === "fulfilled")
      for (const address of v6.value) found.push({ address, family: 6 });
    if (found.length === 0) {
      // Both failed or both empty: the IPv4 answer's error says why (ENOTFOUND, ETIMEOUT).
      throw v4.status === "rejected" ? v4.reason : notFound(host);
    }
    return found;
  };
  return {
    lookup(hostname, options, callback) {
      resolveAll(hostname).then(
        (found) => {
          const family = options.family === 4 || options.family === 6 ? options.family : 0;
          const usable = family === 0 ? found : found.filter((a) => a.family === family);
          if (usable.length === 0) {
            callback(notFound(hostname), "");
            return;
          }
          if (options.all === true) callback(null, usable);
          else callback(null, usable[0]!.address, usable[0]!.family);
        },
        (error: NodeJS.ErrnoException) => callback(error, ""),
      );
    },
    resolveAll: async (host) => (await resolveAll(host)).map((a) => a.address).sort(),
  };
}

function notFound(host: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`no address for ${host}`), {
    code: "ENOTFOUND",
    hostname: host,
  });
}
