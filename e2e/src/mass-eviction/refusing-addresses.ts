import { freePorts } from "../support/index.js";

/**
 * `count` distinct 127.0.0.1 addresses that refuse connections: ports the kernel just handed
 * out and that were closed again, so nothing listens on them (a rack gone, on loopback only).
 * Taken in batches so the test never holds thousands of listening sockets at once.
 */
export async function refusingAddresses(count: number): Promise<string[]> {
  const ports = new Set<number>();
  while (ports.size < count) {
    const batch = await freePorts(Math.min(1_000, count - ports.size));
    for (const port of batch) ports.add(port);
  }
  return [...ports].map((port) => `127.0.0.1:${port}`);
}
