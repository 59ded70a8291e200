import {
  create,
  type UpstreamTls,
  type UpstreamTlsDocument,
  UpstreamTlsSchema,
} from "@clawgate/proto";

/**
 * An upstream's TLS block on the wire: paths only, since the files live on each data plane's
 * machine. `verify` travels inverted, so a message that leaves it out still checks certificates.
 */
export function toUpstreamTls(tls: UpstreamTlsDocument | undefined): UpstreamTls | undefined {
  if (tls === undefined) return undefined;
  return create(UpstreamTlsSchema, {
    enabled: tls.enabled,
    serverName: tls.serverName ?? "",
    caFile: tls.caFile ?? "",
    clientCertFile: tls.clientCertFile ?? "",
    clientKeyFile: tls.clientKeyFile ?? "",
    insecureSkipVerify: !tls.verify,
  });
}
