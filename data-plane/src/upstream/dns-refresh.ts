import { isIP } from "node:net";
import { parseNodeAddress } from "@clawgate/proto";
import type { NodeResolver } from "./node-resolver.js";

export interface DnsRefreshOptions {
  resolver: NodeResolver;
  /** How often each watched name is resolved again; 0 turns the refresh off. */
  refreshMs: number;
  /** A name now resolves to other addresses: these node addresses ("host:port") use it. */
  changed(addresses: readonly string[]): void;
  /** A failed resolution (the last good answer stays in use). */
  failed?(host: string, error: Error): void;
}

interface WatchedName {
  /** The sorted addresses of the last good answer, joined; undefined before the first. */
  answer: string | undefined;
  /** Node addresses with this host. */
  readonly nodes: Set<string>;
}

/**
 * Re-resolves the names of nodes given as DNS names, every `refreshMs` (Envoy's
 * dns_refresh_rate, 5 s by default there too). A new connection resolves its node's name
 * anyway; this is for the connections that never close: a keep-alive connection kept busy
 * would otherwise stay on the old address for as long as traffic flows. When a name's address
 * set changes, `changed` names the node addresses to retire (their pools finish what is in
 * flight and new connections resolve again). A failed or empty answer changes nothing: an
 * outage of DNS must not take down connections that work.
 */
export class DnsRefresh {
  readonly #names = new Map<string, WatchedName>();
  readonly #options: DnsRefreshOptions;
  #timer: NodeJS.Timeout | undefined;
  #running = false;

  constructor(options: DnsRefreshOptions) {
    this.#options = options;
  }

  /** Starts watching a node address's name; an IP literal or a refresh of 0 is ignored. */
  watch(address: string): void {
    if (this.#options.refreshMs <= 0) return;
    const parsed = parseNodeAddress(address);
    if (!parsed.ok || isIP(parsed.host) !== 0) return;
    let name = this.#names.get(parsed.host);
    if (name === undefined) {
      name = { answer: undefined, nodes: new Set() };
      this.#names.set(parsed.host, name);
      // The first answer is the one the pool's first connections get, or close to it.
      void this.#resolve(parsed.host, name);
    }
    name.nodes.add(address);
    this.#timer ??= setInterval(() => void this.#refresh(), this.#options.refreshMs).unref();
  }

  /** Stops watching a node address (its pools are gone). */
  unwatch(address: string): void {
    const parsed = parseNodeAddress(address);
    if (!parsed.ok) return;
    const name = this.#names.get(parsed.host);
    if (name === undefined) return;
    name.nodes.delete(address);
    if (name.nodes.size === 0) this.#names.delete(parsed.host);
    if (this.#names.size === 0) this.close();
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #refresh(): Promise<void> {
    // A slow DNS server must not pile up rounds.
    if (this.#running) return;
    this.#running = true;
    try {
      await Promise.all([...this.#names].map(([host, name]) => this.#resolve(host, name)));
    } finally {
      this.#running = false;
    }
  }

  async #resolve(host: string, name: WatchedName): Promise<void> {
    let answer: string;
    try {
      const addresses = await this.#options.resolver.resolveAll(host);
      if (addresses.length === 0) return;
      answer = addresses.join(",");
    } catch (error) {
      this.#options.failed?.(host, error as Error);
      return;
    }
    const before = name.answer;
    name.answer = answer;
    if (before !== undefined && before !== answer && name.nodes.size > 0) {
      this.#options.changed([...name.nodes]);
    }
  }
}
