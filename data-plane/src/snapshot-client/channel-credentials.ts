import * as grpc from "@grpc/grpc-js";
import { IpAwareTlsCredentials } from "./ip-aware-tls-credentials.js";

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
 * with a client certificate when one is given. The name checked is `serverName` or the dialled
 * host; an IP literal is checked against the certificate's IP SANs and never sent as SNI.
 */
export function snapshotChannelSecurity(tls: SnapshotChannelTls | undefined): ChannelSecurity {
  if (tls === undefined)
    return { credentials: grpc.credentials.createInsecure(), channelOptions: {} };
  return { credentials: new IpAwareTlsCredentials(tls), channelOptions: {} };
}

/** "plaintext", "tls" or "mutual-tls", for logs. */
export function describeChannelSecurity(tls: SnapshotChannelTls | undefined): string {
  if (tls === undefined) return "plaintext";
  return tls.certChain === undefined ? "tls" : "mutual-tls";
}
