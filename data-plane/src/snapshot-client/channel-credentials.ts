import * as grpc from "@grpc/grpc-js";

/** PEM material of the snapshot stream's TLS, read at boot (config/cp-tls.ts). */
export interface SnapshotChannelTls {
  /** CA bundle the control plane's certificate must chain to. */
  ca: Buffer;
  /** Client certificate chain and its key, for mutual TLS; both or neither. */
  certChain?: Buffer;
  privateKey?: Buffer;
  /** Name checked in the control plane's certificate instead of the address's host. */
  serverName?: string;
}

export interface ChannelSecurity {
  credentials: grpc.ChannelCredentials;
  /** Laid over the client's channel options. */
  channelOptions: grpc.ChannelOptions;
}

/**
 * Plaintext without TLS material (the loopback default); else TLS that trusts only the given CA
 * (not the system's roots: the control plane's certificate comes from the operator's own CA),
 * with a client certificate when one is given.
 */
export function snapshotChannelSecurity(tls: SnapshotChannelTls | undefined): ChannelSecurity {
  if (tls === undefined)
    return { credentials: grpc.credentials.createInsecure(), channelOptions: {} };
  return {
    credentials: grpc.credentials.createSsl(tls.ca, tls.privateKey ?? null, tls.certChain ?? null),
    channelOptions:
      tls.serverName === undefined ? {} : { "grpc.ssl_target_name_override": tls.serverName },
  };
}

/** "plaintext", "tls" or "mutual-tls", for logs. */
export function describeChannelSecurity(tls: SnapshotChannelTls | undefined): string {
  if (tls === undefined) return "plaintext";
  return tls.certChain === undefined ? "tls" : "mutual-tls";
}
