import type { Duplex } from "node:stream";
import { Gauge, type Registry } from "prom-client";
import { FrameBoundary } from "./frame-boundary.js";

/** WebSocket close frame, status 1001 "going away" (RFC 6455 7.4.1), as a server sends it. */
const GOING_AWAY = Buffer.from([0x88, 0x02, 0x03, 0xe9]);
/** The same from a client (the upstream's side): masked, with a zero mask key. */
const GOING_AWAY_MASKED = Buffer.from([0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe9]);
const EMPTY = Buffer.alloc(0);

interface Tunnel {
  route: string;
  client: Duplex;
  upstream: Duplex;
  /** What was relayed to the client (from the upstream), and to the upstream. */
  toClient: FrameBoundary;
  toUpstream: FrameBoundary;
  observeToClient: (chunk: Buffer) => void;
  observeToUpstream: (chunk: Buffer) => void;
}

/**
 * Open WebSocket tunnels: counted in clawgate_websocket_tunnels{route}, and closed on drain.
 * A tunnel holds its two sockets, not the snapshot it started under, so it lives on across
 * snapshot swaps until one side closes or the process drains.
 */
export class Tunnels {
  readonly #open = new Set<Tunnel>();
  readonly #gauge: Gauge<"route">;
  /** Set by closeAll: a tunnel opened after it (a handshake in flight) is closed at once. */
  #closing = false;

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

  /**
   * Pipes `client` and `upstream` both ways; the tunnel ends when either side does. `head` is
   * what the client sent with its upgrade request: written upstream first, and counted by the
   * client-to-upstream frame tracker, as it may end inside a frame the client's next bytes finish.
   */
  open(route: string, client: Duplex, upstream: Duplex, head: Buffer = EMPTY): void {
    const toClient = new FrameBoundary();
    const toUpstream = new FrameBoundary();
    const tunnel: Tunnel = {
      route,
      client,
      upstream,
      toClient,
      toUpstream,
      observeToClient: (chunk) => toClient.feed(chunk),
      observeToUpstream: (chunk) => toUpstream.feed(chunk),
    };
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
    if (head.length > 0) {
      upstream.write(head);
      toUpstream.feed(head);
    }
    if (this.#closing) {
      goAway(tunnel);
      return;
    }
    // Beside the pipes, which relay the same chunks: where each direction's frames end.
    client.on("data", tunnel.observeToUpstream);
    upstream.on("data", tunnel.observeToClient);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /**
   * Drain: each side is told "going away" (1001) and ended, and so is every tunnel opened from
   * now on (a handshake in flight that gets its 101 later). Bytes in flight are not relayed any
   * more; a side whose last frame was relayed only in part is cut instead, as a close frame
   * written there would land inside that frame.
   */
  closeAll(): void {
    this.#closing = true;
    for (const tunnel of this.#open) goAway(tunnel);
  }
}

function goAway(tunnel: Tunnel): void {
  const { client, upstream } = tunnel;
  client.unpipe(upstream);
  upstream.unpipe(client);
  client.off("data", tunnel.observeToUpstream);
  upstream.off("data", tunnel.observeToClient);
  if (!tunnel.toClient.atBoundary) client.destroy();
  else if (client.writable) client.end(GOING_AWAY);
  if (!tunnel.toUpstream.atBoundary) upstream.destroy();
  else if (upstream.writable) upstream.end(GOING_AWAY_MASKED);
}
