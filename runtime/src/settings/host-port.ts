import { z } from "zod";

/** A parsed `host:port`; an IPv6 host is kept without its brackets. */
export interface HostPort {
  host: string;
  port: number;
}

export type HostPortResult = { ok: true; value: HostPort } | { ok: false; reason: string };

const HOST_PORT = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/;

/**
 * Parses `host:port` (IPv6 as `[::1]:8080`). A listener may ask for port 0 (the kernel picks
 * one); an address to dial may not.
 */
export function parseHostPort(text: string, options: { allowPortZero: boolean }): HostPortResult {
  const match = HOST_PORT.exec(text);
  if (!match) return { ok: false, reason: "must be host:port (IPv6 as [::1]:port)" };
  const host = match[1] ?? match[2] ?? "";
  const port = Number(match[3]);
  const min = options.allowPortZero ? 0 : 1;
  if (port < min || port > 65535) return { ok: false, reason: `port must be ${min}-65535` };
  return { ok: true, value: { host, port } };
}

/** The inverse of parseHostPort, bracketing IPv6 hosts. */
export function formatHostPort({ host, port }: HostPort): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/** A setting holding `host:port`: a listener (port 0 allowed) or an address to dial. */
export function hostPortSetting(use: "listen" | "dial") {
  return z.string().superRefine((value, ctx) => {
    const parsed = parseHostPort(value, { allowPortZero: use === "listen" });
    if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.reason });
  });
}

/** True for addresses only this host can reach: 127.0.0.0/8, ::1 and localhost. */
export function isLoopback(address: string): boolean {
  const parsed = parseHostPort(address, { allowPortZero: true });
  if (!parsed.ok) return false;
  const { host } = parsed.value;
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}
