import { ServerCredentials } from "@grpc/grpc-js";

/** PEM material of the snapshot service's TLS, read at boot (config/grpc-tls.ts). */
export interface GrpcServerTls {
  /** Certificate chain presented to data planes. */
  certChain: Buffer;
  /** Private key of the first certificate in certChain. */
  privateKey: Buffer;
  /** CA bundle data planes' certificates must chain to; present means mutual TLS. */
  clientCa?: Buffer;
}

/** How the snapshot channel is secured, as logs and the startup line say it. */
export type ChannelSecurity = "plaintext" | "tls" | "mutual-tls";

export function channelSecurity(tls: GrpcServerTls | undefined): ChannelSecurity {
  if (tls === undefined) return "plaintext";
  return tls.clientCa === undefined ? "tls" : "mutual-tls";
}

/**
 * Plaintext without TLS material (the loopback default); else TLS with the given certificate,
 * and with a client CA, mutual TLS: a data plane without a certificate that CA signed fails the
 * handshake and never reaches the snapshot service.
 */
export function snapshotServerCredentials(tls: GrpcServerTls | undefined): ServerCredentials {
  if (tls === undefined) return ServerCredentials.createInsecure();
  return ServerCredentials.createSsl(
    tls.clientCa ?? null,
    [{ private_key: tls.privateKey, cert_chain: tls.certChain }],
    tls.clientCa !== undefined,
  );
}
