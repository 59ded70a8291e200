import type { Duplex } from "node:stream";
import { Gauge, type Registry } from "prom-client";

/** WebSocket close frame, status 1001 "going away" (RFC 6455 7.4.1), as a server sends it. */
const GOING_AWAY = Buffer.from([0x88, 0x02, 0x03, 0xe9]);
/** The same from a client (the upstream's side): masked, with a zero mask key. */
const GOING_AWAY_MASKED = Buffer.from([0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe9]);

interface Tunnel {
  route: string;
  client: Duplex;
  upstream: Duplex;
}

/**
 * Open WebSocket tunnels: counted in clawgate_websocket_tunnels{route}, and closed on drain.
 * A tunnel holds its two sockets, not the snapshot it started under, so it lives on across
 * snapshot swaps until one side closes or the process drains.
 */
export class Tunnels {
  readonly #open = new Set<Tunnel>();
  readonly #gauge: Gauge<"route">;

  constructor(registry: Registry) {
    this.#gauge = new Gauge({
      name: "clawgate_websocket_tunnels",
      help: "Open WebSocket tunnels, by route.",
      labelNames: ["route"],
      registers: [registry],
    });
  }

  get size(): number {
    return this.#open.size;
  }

  /** Pipes `client` and `upstream` both ways; the tunnel ends when either side does. */
  open(route: string, client: Duplex, upstream: Duplex): void {
    const tunnel: Tunnel = { route, client, upstream };
    this.#open.add(tunnel);
    this.#gauge.inc({ route });
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      this.#open.delete(tunnel);
      this.#gauge.dec({ route });
      client.destroy();
      upstream.destroy();
    };
    // Either side ending or failing ends both: a half-open tunnel would hold a socket forever.
    for (const socket of [client, upstream]) {
      socket.on("close", close);
      socket.on("error", close);
      socket.on("end", close);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /**
   * Drain: each side is told "going away" (1001) and ended. Bytes in flight are not relayed
   * any more, so the close frame is not spliced into a frame being relayed.
   */
  closeAll(): void {
    for (const { client, upstream } of this.#open) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      if (client.writable) client.end(GOING_AWAY);
      if (upstream.writable) upstream.end(GOING_AWAY_MASKED);
    }
  }
}
