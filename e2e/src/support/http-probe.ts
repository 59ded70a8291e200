import { connect } from "node:net";

/** Status of a GET, or undefined when nothing answered (refused, reset, timed out). */
export async function httpStatus(url: string, timeoutMs = 1_000): Promise<number | undefined> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return undefined;
  }
}

/** True when a TCP connect to host:port succeeds within `timeoutMs`. */
export function tcpReachable(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

export function splitHostPort(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(":");
  return {
    host: address.slice(0, at).replace(/^\[|\]$/g, ""),
    port: Number(address.slice(at + 1)),
  };
}
